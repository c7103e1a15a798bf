"""Rolling restarts, planned: which workers, in which order, and what the worker documents say.

Pure functions of the spec and of documents already read; no I/O.

A rolling restart (``servelab restart --rolling ROLE|SERVICE...``) takes the workers one at a
time out of the router, drains, restarts and proves each, and puts it back before the next: so
every role it touches needs at least one other worker of that role to serve meanwhile, and only
prefill and decode workers can roll (the router and a proxy have nobody to stand in for them).

The phases of one worker, in order: :class:`RollPhase`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from servelab.core.deploy.routers import RouterKind
from servelab.core.deploy.spec import DeploymentSpec
from servelab.errors import SpecError

__all__ = [
    "ROLLING_ROLES",
    "RollOptions",
    "RollPhase",
    "RollTarget",
    "rolling_plan",
    "router_kind",
    "running_requests",
]

#: The roles a rolling restart can take out of the router one at a time.
ROLLING_ROLES: tuple[str, ...] = ("prefill", "decode")


class RollPhase(StrEnum):
    """The phases of one worker's roll, in order (values are stored: never change one)."""

    #: Take the worker out of the router (by its id, read from the router's worker list).
    REMOVE = "remove"
    #: Wait (bounded) until the worker runs no request (its ``/get_load``).
    DRAIN = "drain"
    #: Stop and start the worker alone (its dependents and the router are not restarted).
    RESTART = "restart"
    #: Prove it ready and its knobs live (verify's live and health layers, for this worker).
    VERIFY = "verify"
    #: Put it back into the router and wait until the router lists it healthy.
    ADD = "add"
    #: Wait until the router sends it requests (its served-request counter grows).
    ROUTED = "routed"


@dataclass(frozen=True)
class RollTarget:
    """One worker to roll: its service name, role, URL (as the router knows it) and, for a
    prefill, the bootstrap port the router passes on."""

    service: str
    role: str
    url: str
    bootstrap_port: int | None = None


@dataclass(frozen=True)
class RollOptions:
    """The bounds of each wait: the drain (in-flight requests reach 0), the router's worker list
    (removed / listed healthy again), the first request routed to the restarted worker; and how
    often each is polled."""

    drain_timeout_s: float = 120.0
    router_timeout_s: float = 30.0
    routed_timeout_s: float = 30.0
    poll_s: float = 0.2


def router_kind(spec: DeploymentSpec) -> RouterKind:
    """Which router's worker API the deployment speaks: its router's ``kind``
    (:attr:`~servelab.core.deploy.spec.DeploymentSpec.router`: sglang-router 0.3.2 for an SGLang
    spec that names none, smg 1.13.0, vllm-router 0.1.17 for a vLLM one).

    The one place that decides it; :func:`servelab.io.routerworkers.router_workers` picks the
    router's API from it.
    """
    return spec.router.kind


def _expand(spec: DeploymentSpec, selectors: Iterable[str]) -> list[str]:
    wanted: set[str] = set()
    for selector in selectors:
        if selector in ROLLING_ROLES and selector not in spec.services:
            wanted.update(spec.by_role("prefill" if selector == "prefill" else "decode"))
            continue
        svc = spec.service(selector)  # SpecError naming the known services
        if svc.role not in ROLLING_ROLES:
            raise SpecError(
                f"{selector} is a {svc.role}: only prefill and decode workers can roll "
                "(use `servelab restart` for it)",
                source=spec.source,
                path=f"services.{selector}",
            )
        wanted.add(selector)
    return [name for name in spec.services if name in wanted]


def _check_peers(spec: DeploymentSpec, names: list[str]) -> None:
    for role in ROLLING_ROLES:
        peers = spec.by_role("prefill" if role == "prefill" else "decode")
        if any(spec.service(name).role == role for name in names) and len(peers) < 2:
            raise SpecError(
                f"a rolling restart needs at least two {role} workers (the others serve while "
                f"one is out); this deployment has {len(peers)}: use `servelab restart`",
                source=spec.source,
                path="services",
            )


def rolling_plan(spec: DeploymentSpec, selectors: Iterable[str]) -> list[RollTarget]:
    """The workers ``selectors`` name (roles ``prefill``/``decode`` or service names), in the
    spec's order, each once. Raises :class:`~servelab.errors.SpecError` for a router or proxy,
    for a role with fewer than two workers, or when the deployment has no router."""
    if spec.router_name is None:
        raise SpecError(
            "a rolling restart needs a router to take workers out of", source=spec.source
        )
    names = _expand(spec, selectors)
    if not names:
        raise SpecError("name at least one role or service to roll", source=spec.source)
    _check_peers(spec, names)
    targets = []
    for name in names:
        svc = spec.service(name)
        port = svc.bootstrap_port if svc.role == "prefill" else None
        targets.append(RollTarget(name, svc.role, svc.url, port))
    return targets


def running_requests(load: object) -> int | None:
    """Requests a worker is running or queueing, from its ``/get_load`` answer: SGLang's
    ``[{"dp_rank", "num_reqs", ...}]`` (summed over ranks; a bare object is one rank), or the
    ``{"load": N}`` vllm-router reads. None when the document is neither shape."""
    if isinstance(load, dict) and "load" in load and "num_reqs" not in load:
        value = load["load"]
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    ranks = load if isinstance(load, list) else [load]
    total = 0
    for rank in ranks:
        value = rank.get("num_reqs") if isinstance(rank, dict) else None
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        total += value
    return total if ranks else None
