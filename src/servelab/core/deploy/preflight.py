"""Pre-flight rules, pure: what each service needs before ``up`` or ``restart`` starts anything.

Before the first service starts, every service about to start must have an env file that parses,
every port it will bind free (or held by its own process group, which is stopped first), for
``start = "router"``, the router's Python module importable, and for a systemd ``unit``, the unit
file loaded as it is on disk (else a restart would run its old command line). :func:`bound_ports`
and :func:`requirements` say what a service needs; the caller finds the facts on the hosts
(:class:`ServiceFacts`); :func:`problems` turns them into :class:`Problem` codes, one per unmet
need, in plan order. Nothing here reads a file or a socket.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from servelab.core.deploy.routers import SMG, RouterOptions, router_description
from servelab.core.deploy.spec import ServiceSpec
from servelab.core.engines import EngineName

__all__ = [
    "PROBLEM_ENV",
    "PROBLEM_ENV_UNREADABLE",
    "PROBLEM_MODULE",
    "PROBLEM_PORT",
    "PROBLEM_UNIT",
    "ROUTER_PACKAGE",
    "PortClaim",
    "PortState",
    "Problem",
    "Requirement",
    "ServiceFacts",
    "bound_ports",
    "problems",
    "requirements",
]

#: What to install for the embedded default's router, smg (a dependency of servelab; the
#: problem names each spec's own router's package).
ROUTER_PACKAGE = SMG.package

PROBLEM_ENV = "env"
PROBLEM_ENV_UNREADABLE = "env_unreadable"
PROBLEM_PORT = "port"
PROBLEM_MODULE = "module"
PROBLEM_UNIT = "unit_stale"


@dataclass(frozen=True)
class PortClaim:
    """A port a service binds: ``field`` is where the spec says so (``url``, ``bootstrap_port``)."""

    field: str
    port: int


@dataclass(frozen=True)
class Requirement:
    """A Python module the service's launcher imports, and the package that provides it
    (``NAME==VERSION``: that distribution must be installed at that version)."""

    module: str
    package: str

    @property
    def pinned(self) -> tuple[str, str] | None:
        """(distribution, version) when the package pins one."""
        name, sep, version = self.package.partition("==")
        return (name, version) if sep else None


@dataclass(frozen=True)
class PortState:
    """Who listens on a claimed port now: ``owner`` None when free; ``own`` when the owner is in
    the service's own recorded process group (stopped before the service starts again)."""

    claim: PortClaim
    owner: int | None
    own: bool = False


@dataclass(frozen=True)
class ServiceFacts:
    """What the hosts said about one service about to start."""

    service: str
    host: str
    env_error: str | None = None
    env_unreadable: str | None = None
    ports: tuple[PortState, ...] = ()
    missing: tuple[Requirement, ...] = ()
    #: The systemd unit, when it changed on disk and systemd has not reloaded it.
    stale_unit: str | None = None


@dataclass(frozen=True)
class Problem:
    """One unmet need: ``kind`` one of the ``PROBLEM_*`` codes, with the fact behind it (the
    env file's error, the port and its owner, the missing requirement, or the stale unit)."""

    service: str
    host: str
    kind: str
    env_error: str | None = None
    port: PortState | None = None
    need: Requirement | None = None
    unit: str | None = None


def bound_ports(svc: ServiceSpec) -> list[PortClaim]:
    """Every port the service binds: its URL's, its bootstrap port, the router's metrics port."""
    claims = [PortClaim("url", svc.port)]
    if svc.bootstrap_port is not None:
        claims.append(PortClaim("bootstrap_port", svc.bootstrap_port))
    if svc.start == "router":
        metrics = (svc.router or RouterOptions()).prometheus_port
        claims.append(PortClaim("router.prometheus_port", metrics))
    return claims


def requirements(svc: ServiceSpec, engine_name: EngineName = "sglang") -> list[Requirement]:
    """The modules the service's launcher needs (``start = "router"``: the router its
    ``router.kind`` names, else the engine's own, at its pinned version)."""
    if svc.start == "router":
        kind = None if svc.router is None else svc.router.kind
        router = router_description(engine_name, kind)
        return [Requirement(router.module, router.package)]
    return []


def problems(facts: Iterable[ServiceFacts]) -> list[Problem]:
    """Every unmet need of the services about to start, in their order."""
    found: list[Problem] = []
    for fact in facts:
        if fact.env_error is not None:
            found.append(Problem(fact.service, fact.host, PROBLEM_ENV, env_error=fact.env_error))
        if fact.env_unreadable is not None:
            unreadable = fact.env_unreadable
            found.append(
                Problem(fact.service, fact.host, PROBLEM_ENV_UNREADABLE, env_error=unreadable)
            )
        found.extend(
            Problem(fact.service, fact.host, PROBLEM_PORT, port=state)
            for state in fact.ports
            if state.owner is not None and not state.own
        )
        found.extend(
            Problem(fact.service, fact.host, PROBLEM_MODULE, need=need) for need in fact.missing
        )
        if fact.stale_unit is not None:
            found.append(Problem(fact.service, fact.host, PROBLEM_UNIT, unit=fact.stale_unit))
    return found
