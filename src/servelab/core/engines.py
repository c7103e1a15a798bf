"""The serving engines servelab drives, one description each: SGLang and vLLM.

Everything that differs between the engines above the simulator lives here (DESIGN "Engines"):
the decode knob a fresh spec declares, which router endpoint tells the truth about readiness, and
the engine's Prometheus names. Commands stay engine-blind: they ask :func:`engine` for the
description of a spec's ``engine`` field. Which router runs, and how it is launched, is
:mod:`servelab.core.deploy.routers` (sglang-router and its successor smg both drive SGLang workers
and share these facts: the ``smg_`` metric names, ``/readiness`` as the truth).

Readiness, observed on the pinned routers (``tests/core/deploy/test_engines.py`` and
``tests/sim/test_vllm_router.py`` hold the facts):

- sglang-router 0.3.2 and smg 1.13: ``/health`` is 200 whatever the workers do; ``/readiness`` is
  the truth (smg's 503 says why: ``{"status": "not ready", "reason": "insufficient healthy
  workers"}``).
- vllm-router 0.1.17: it does not listen at all until every worker's ``/health`` is 200 at
  start-up. Afterwards ``/liveness`` is always 200 ``OK`` (the process only); ``/health`` is 200
  ``All servers healthy`` only while EVERY worker is healthy (503 ``Unhealthy servers: [...]``
  otherwise); ``/readiness`` is 200 ``{"status": "ready", "prefill": {"healthy": h, "total": t},
  "decode": {...}}`` while at least one worker of EACH role is healthy (503 ``not_ready`` with a
  ``reason`` otherwise). Both follow the router's own health checker, so they lag a dead worker by
  up to ``--health-check-interval-secs``. ``/readiness`` says whether it can serve: it gates
  ``up``, as for sglang-router.

The metric names: :mod:`servelab.core.soak.diagnose` reads SGLang's; :func:`canonical_metrics`
renames a vLLM engine's scrape into them (summed values, as ``parse_metrics`` returns them). The
counters that prove a worker served requests (:mod:`servelab.core.verify.served`): the engine's
own (:attr:`Engine.served_counter`) and its router's per worker
(:attr:`Engine.router_worker_counter`), both read from the engines' and routers' source and
checked on the pinned routers (``tests/contracts/``).

Pure: data and functions of data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "ENGINES",
    "SGLANG",
    "SGLANG_KNOB",
    "VLLM",
    "VLLM_KNOB",
    "VLLM_TO_SGLANG_METRICS",
    "Engine",
    "EngineName",
    "WorkerCounts",
    "canonical_metrics",
    "engine",
    "readiness_workers",
]

EngineName = Literal["sglang", "vllm"]

#: The reference deployment's decode knob (split-K GEMM target CTAs on SM120).
SGLANG_KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"
#: The simulated vLLM decode's stand-in for it (the same modelled kernel under a vLLM-style name;
#: vLLM reads ``VLLM_*`` variables from the environment once, at start-up, like this one).
VLLM_KNOB = "VLLM_SM120_MMA_TARGET_CTAS"

#: vLLM's engine metric names -> the SGLang names servelab's rules read.
VLLM_TO_SGLANG_METRICS: Mapping[str, str] = {
    "vllm:num_requests_running": "sglang:num_running_reqs",
    "vllm:num_requests_waiting": "sglang:num_queue_reqs",
    "vllm:generation_tokens_total": "sglang:generation_tokens_total",
    "vllm:prompt_tokens_total": "sglang:prompt_tokens_total",
    "vllm:request_success_total": "sglang:num_requests_total",
    "vllm:nixl_num_failed_transfers_total": "sglang:num_transfer_failed_reqs_total",
}


@dataclass(frozen=True)
class Engine:
    """One engine: its router launcher, its decode knob, and how its router says "ready"."""

    name: EngineName
    #: The decode knob a spec of this engine declares by default.
    knob: str
    #: The router endpoint that is 200 exactly when it can serve (gates ``up``, probed by a soak's
    #: localization).
    router_ready_path: str = "/readiness"
    #: A worker's (and any other service's) endpoint that is 200 once it serves (gates ``up``).
    worker_ready_path: str = "/health"
    #: The router endpoint that is 200 only while every worker is healthy (None: no such one).
    router_all_healthy_path: str | None = None
    #: Metric renames into the SGLang names (empty for SGLang itself).
    metric_names: Mapping[str, str] = field(default_factory=dict)
    #: Boolean arguments not spelt ``--enable-…``/``--disable-…`` (those always are booleans).
    boolean_flags: frozenset[str] = frozenset()
    #: A boolean has a ``--no-x`` form, and an absent flag means the engine's default (vLLM's
    #: ``BooleanOptionalAction``); without it (SGLang's ``store_true``), absent means off.
    negatable_flags: bool = False
    #: The parser reads ``--max_num_seqs`` as ``--max-num-seqs`` (and config keys likewise).
    underscores: bool = False
    #: Where the engine reports what it runs with, tried in order (SGLang: ``/get_server_info``
    #: is the older alias of ``/server_info``).
    report_paths: tuple[str, ...] = ("/server_info", "/get_server_info")
    #: ``/server_info`` answers only when the engine was started with this env variable set to 1.
    server_info_switch: str | None = None
    #: The engine's counter of the requests it finished, in its ``/metrics``.
    served_counter: str = "sglang:num_requests_total"
    #: The prefix of every one of the engine's own series in its ``/metrics``.
    metric_prefix: str = "sglang:"
    #: The router's counter of each worker's requests (its ``worker`` label: the worker's URL as
    #: the router was given it), and the labels a counted sample also has.
    router_worker_counter: str = "smg_worker_cb_outcomes_total"
    #: The prefix of every one of the router's own series on its Prometheus port.
    router_metric_prefix: str = "smg_"
    router_worker_match: Mapping[str, str] = field(default_factory=lambda: {"outcome": "success"})


#: SGLang's ``store_true`` arguments not named ``--enable-…``/``--disable-…`` (server_args.py).
_SGLANG_BOOLEANS = frozenset({
    "--trust-remote-code", "--skip-server-warmup", "--log-requests", "--show-time-cost",
    "--is-embedding", "--skip-tokenizer-init", "--allow-auto-truncate",
})  # fmt: skip
#: vLLM's booleans not named ``--enable-…``/``--disable-…`` (engine/arg_utils.py).
_VLLM_BOOLEANS = frozenset({
    "--trust-remote-code", "--enforce-eager", "--async-scheduling", "--disable-log-stats",
    "--skip-tokenizer-init",
})  # fmt: skip

SGLANG = Engine(
    name="sglang",
    knob=SGLANG_KNOB,
    boolean_flags=_SGLANG_BOOLEANS,
)
VLLM = Engine(
    name="vllm",
    knob=VLLM_KNOB,
    router_all_healthy_path="/health",
    metric_names=VLLM_TO_SGLANG_METRICS,
    boolean_flags=_VLLM_BOOLEANS,
    negatable_flags=True,
    underscores=True,
    report_paths=("/server_info?config_format=json",),
    server_info_switch="VLLM_SERVER_DEV_MODE",
    served_counter="vllm:request_success_total",
    metric_prefix="vllm:",
    router_worker_counter="vllm_router_processed_requests_total",
    router_metric_prefix="vllm_router_",
    router_worker_match={},
)
ENGINES: Mapping[str, Engine] = {SGLANG.name: SGLANG, VLLM.name: VLLM}


def engine(name: str) -> Engine:
    """The description of engine ``name`` (``"sglang"`` or ``"vllm"``)."""
    try:
        return ENGINES[name]
    except KeyError:
        known = ", ".join(ENGINES)
        raise ValueError(f"unknown engine {name!r} (known: {known})") from None


def canonical_metrics(values: Mapping[str, float]) -> dict[str, float]:
    """A parsed scrape with vLLM names renamed to SGLang's (other names unchanged).

    Engine-blind on purpose: a scrape holds one engine's names, so renaming every vLLM name it
    knows is right for both engines.
    """
    renamed: dict[str, float] = {}
    for name, value in values.items():
        key = VLLM_TO_SGLANG_METRICS.get(name, name)
        renamed[key] = renamed.get(key, 0.0) + value
    return renamed


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class WorkerCounts:
    """How many of a router's workers are healthy, of how many (None: a count it gave that is
    no integer)."""

    healthy: int | None
    total: int | None


def readiness_workers(doc: object) -> WorkerCounts | None:
    """The worker counts of a router's ``/readiness`` document (parsed JSON).

    sglang-router gives ``healthy_workers``/``total_workers`` at the top level; vllm-router per
    role (``{"prefill": {"healthy": h, "total": t}, "decode": {...}}``: summed). None when the
    document has neither.
    """
    if not isinstance(doc, dict):
        return None
    if "healthy_workers" in doc:
        return WorkerCounts(_count(doc.get("healthy_workers")), _count(doc.get("total_workers")))
    healthy = total = 0
    for role in ("prefill", "decode"):
        counts = doc.get(role)
        if not isinstance(counts, dict):
            return None
        h, t = _count(counts.get("healthy")), _count(counts.get("total"))
        if h is None or t is None:
            return None
        healthy, total = healthy + h, total + t
    return WorkerCounts(healthy, total)
