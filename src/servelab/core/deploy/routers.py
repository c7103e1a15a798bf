"""The routers servelab runs (``start = "router"``), one description each, and which one a spec
chooses.

Three real routers, each pinned to the version the tests hold facts for
(``tests/contracts/routers.toml``, pinned by ``tests/contracts/test_routers.py``):

- ``sglang-router`` 0.3.2 (January 2026): SGLang's router, the one a spec runs when its router
  table names no ``kind`` (``engine = "sglang"``), so a spec written before smg keeps its router;
- ``smg`` 1.13.0 (Shepherd Model Gateway, October 2026): sglang-router renamed, what SGLang PD
  operators run now, and what the embedded default and ``servelab demo`` run. It routes by model
  (a model no worker serves answers 503 ``no_available_workers``), keeps a removed worker listed
  as ``draining`` for about 5 s, answers 409 ``WORKER_ALREADY_EXISTS`` to a URL it lists, and
  reports loads as ``{"loads": [{"worker", "worker_type", "num_running_reqs", ...}]}``;
- ``vllm-router`` 0.1.17: vLLM's, the only one for ``engine = "vllm"``.

The spec chooses with ``router = { kind = "smg" }`` (and may pin ``version``, which must be the
one servelab is tested against). Every router rewrites its process title and argv
(``sglang::router``, ``smg::router``): what it runs with is read from what it reports (its
metrics), never from ``/proc/PID/cmdline``.

Pure: data and functions of data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from servelab.core.engines import EngineName

__all__ = [
    "ROUTERS",
    "SGLANG_ROUTER",
    "SMG",
    "VLLM_ROUTER",
    "Router",
    "RouterKind",
    "RouterKindName",
    "RouterOptions",
    "router_description",
    "router_problem",
    "router_process",
]


class RouterKind(StrEnum):
    """A router servelab can run, by its PyPI name (the spec's ``router.kind``; stored)."""

    SGLANG_ROUTER = "sglang-router"
    SMG = "smg"
    VLLM_ROUTER = "vllm-router"


@dataclass(frozen=True)
class Router:
    """One router: how it is launched, what provides it, and the facts its argv builder and its
    readers depend on."""

    kind: RouterKind
    #: The engine whose workers it drives in PD mode.
    engine: EngineName
    #: ``python -m MODULE`` starts it.
    module: str
    #: The distribution that provides the module, and the version servelab is tested against.
    distribution: str
    version: str
    #: ``--worker-startup-check-interval`` servelab passes (None: the router's own is fine).
    startup_check_interval_s: int | None = None

    @property
    def package(self) -> str:
        """The pinned requirement (``smg==1.13.0``), named when the module is missing."""
        return f"{self.distribution}=={self.version}"


SGLANG_ROUTER = Router(
    kind=RouterKind.SGLANG_ROUTER,
    engine="sglang",
    module="sglang_router.launch_router",
    distribution="sglang-router",
    version="0.3.2",
)
SMG = Router(
    kind=RouterKind.SMG,
    engine="sglang",
    module="smg.launch_router",
    distribution="smg",
    version="1.13.0",
    startup_check_interval_s=1,  # its default, 30 s, would stall a start after one failed probe
)
VLLM_ROUTER = Router(
    kind=RouterKind.VLLM_ROUTER,
    engine="vllm",
    module="vllm_router.launch_router",
    distribution="vllm-router",
    version="0.1.17",
    startup_check_interval_s=1,  # its default is 30 s too
)
ROUTERS: Mapping[RouterKind, Router] = {r.kind: r for r in (SGLANG_ROUTER, SMG, VLLM_ROUTER)}
#: The router of an engine when the spec names no kind.
_ENGINE_DEFAULT: Mapping[str, Router] = {"sglang": SGLANG_ROUTER, "vllm": VLLM_ROUTER}


def router_description(engine: str, kind: str | None = None) -> Router:
    """The router a spec of ``engine`` runs: ``kind`` when given, else the engine's own."""
    if kind is None:
        return _ENGINE_DEFAULT[engine]
    return ROUTERS[RouterKind(kind)]


def router_problem(engine: str, kind: str | None, version: str | None) -> tuple[str, str] | None:
    """Why a spec's router choice cannot run, as (the router table's key, the reason); None
    when it can. A kind for another engine's workers, or a version servelab is not tested
    against."""
    router = router_description(engine, kind)
    if router.engine != engine:
        fits = " or ".join(f'"{r.kind}"' for r in ROUTERS.values() if r.engine == engine)
        return "kind", f"{router.kind} drives {router.engine} workers, not {engine} (use {fits})"
    if version is not None and version != router.version:
        return "version", (
            f"servelab runs {router.kind} {router.version} (its facts are tested against that "
            f"version), not {version}"
        )
    return None


#: The longest router timeout or interval a spec may give (seconds): a day, as its other timeouts.
_DAY_S = 86_400

RouterKindName = Literal["sglang-router", "smg", "vllm-router"]


class RouterOptions(BaseModel):
    """Which real router a ``start = "router"`` service runs, and its arguments.

    ``kind`` absent: the deployment engine's own router (sglang-router 0.3.2 for ``"sglang"``,
    vllm-router 0.1.17 for ``"vllm"``); ``"smg"``: smg 1.13.0, sglang-router's successor.
    ``version``, when given, must be the pinned one (:func:`router_problem`, checked with the
    spec). A table of the spec (``[services.NAME.router]``): strict, as every table of it."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    kind: RouterKindName | None = None
    version: str | None = None
    policy: str = "round_robin"
    #: ``--prefill-policy``/``--decode-policy`` (PD: each role's own policy; absent: ``policy``).
    prefill_policy: str | None = None
    decode_policy: str | None = None
    prometheus_port: int = Field(default=29000, ge=1, le=65535)
    worker_startup_timeout_s: int = Field(default=60, ge=1, le=_DAY_S)
    health_check_interval_s: int = Field(default=5, ge=1, le=_DAY_S)
    request_timeout_s: int | None = Field(default=None, ge=1, le=_DAY_S)
    #: ``--health-failure-threshold``/``--health-success-threshold`` (absent: the router's own).
    health_failure_threshold: int | None = Field(default=None, ge=1)
    health_success_threshold: int | None = Field(default=None, ge=1)
    extra_args: list[str] = Field(default_factory=list)


#: The process title each router writes over its argv (``/proc/PID/cmdline`` and ``comm``; seen on
#: sglang-router 0.3.2, smg 1.13.0, vllm-router 0.1.17): a first word ``NAME::router``.
_TITLE_SUFFIX = "::router"
#: What starts a router that has not (yet) written its title: its console script or module.
_LAUNCHERS = frozenset(
    {r.distribution for r in ROUTERS.values()} | {r.module for r in ROUTERS.values()}
)


def router_process(argv: Sequence[str]) -> str | None:
    """The word telling that the process of ``argv`` (its ``/proc/PID/cmdline``) is a router,
    not an engine's worker: its process title (``sglang::router``, ``smg::router``,
    ``vllm::router``), or its console script's name or ``-m`` module (``smg``,
    ``sglang_router.launch_router``); None: no router's. Only that word is returned, never an
    argument (which may hold a secret)."""
    if not argv:
        return None
    first = argv[0].strip()
    if first.endswith(_TITLE_SUFFIX) and " " not in first:
        return first
    script = first.rpartition("/")[2]
    if script in _LAUNCHERS:
        return script
    for flag, word in pairwise(argv):
        if flag == "-m":
            return word if word in _LAUNCHERS else None
    return None
