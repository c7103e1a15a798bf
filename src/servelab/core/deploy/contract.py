"""deploy's contract: what ``up`` and ``down`` did (:class:`DeployReport`) and one service as it
is now (:class:`ServiceStatus`). Pure types built by ops, stored (``deployments.detail``) and
printed (``--json``) as their encoding; report words them. A restart, which composes deploy and
verify, is :mod:`servelab.core.restart.contract`."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import computed_field

from servelab.core.deploy.probe import ProbeResult
from servelab.core.deploy.steps import Step

__all__ = ["DeployReport", "ServiceStatus"]


@dataclass
class DeployReport:
    """The result of ``up`` or ``down``; a failed ``up`` also says why and what it stopped."""

    action: str
    steps: list[Step]
    deployment_id: int | None = None
    error: str | None = None
    interrupted: bool = False
    stopped: list[str] = field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        return all(step.ok for step in self.steps) and self.error is None


@dataclass
class ServiceStatus:
    """One service as it is now."""

    service: str
    role: str
    host: str
    url: str
    pid: int | None
    pid_source: str | None
    alive: bool
    readiness: ProbeResult | None
    #: A prefill or decode: whether the router lists it, and healthy (None: not known).
    in_router: bool | None = None
    router_healthy: bool | None = None
    #: Its process was launched by servelab (it carries the mark) but has no pid record.
    unrecorded: bool = False
    #: Its host did not answer (the rest is unknown).
    error: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ready(self) -> bool:
        return self.readiness is not None and self.readiness.ok
