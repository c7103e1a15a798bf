"""The typed results of ``up``/``down``/``restart``/``status`` (:mod:`servelab.ops.deploy.deploy`).

- What happened to each service is a :class:`~servelab.ops.deploy.steps.Step`.
- :class:`DeployReport`: ``up`` or ``down``; a failed ``up`` also says why and what it stopped.
- :class:`RestartReport`: the restart's steps, verification, rollback, and what it left down
  with the command that brings it back.
- :class:`DeployInterrupted`: the :class:`asyncio.CancelledError` a cancelled ``up``/``restart``
  raises, carrying its report.
- :class:`ServiceStatus`: one service as it is now.
"""

from __future__ import annotations

import asyncio
import shlex
from dataclasses import dataclass, field

from servelab.core.ledger.codec import JsonObject
from servelab.core.verify.checks import Check, CheckCode
from servelab.io.http.client import ProbeResult
from servelab.ops.deploy.rolling_results import RollingReport
from servelab.ops.deploy.steps import Step
from servelab.ops.verify.verify import VerifyReport

__all__ = [
    "DeployInterrupted",
    "DeployReport",
    "RestartReport",
    "ServiceStatus",
]


@dataclass
class DeployReport:
    """The result of ``up`` or ``down``; a failed ``up`` also says why and what it stopped."""

    action: str
    steps: list[Step]
    deployment_id: int | None = None
    error: str | None = None
    interrupted: bool = False
    stopped: list[str] = field(default_factory=list)
    #: ``up``: the P/D pair layer's checks once everything is ready (a mismatch fails ``up``).
    pair: list[Check] = field(default_factory=list)

    @property
    def pair_mismatches(self) -> list[Check]:
        return [check for check in self.pair if check.code is CheckCode.PAIR_MISMATCH]

    @property
    def ok(self) -> bool:
        steps_ok = all(step.ok for step in self.steps) and self.error is None
        return steps_ok and not self.pair_mismatches

    def to_json(self) -> JsonObject:
        doc: JsonObject = {
            "action": self.action,
            "ok": self.ok,
            "deployment_id": self.deployment_id,
            "steps": [step.to_json() for step in self.steps],
            "error": self.error,
            "interrupted": self.interrupted,
            "stopped": self.stopped,
        }
        if self.pair:
            doc["pair"] = [check.to_json() for check in self.pair]
        return doc


@dataclass
class RestartReport:
    """The result of ``restart``: its steps, the verification, and the rollback if one ran."""

    plan: list[str]
    steps: list[Step]
    verification: VerifyReport | None = None
    backups: dict[str, str] = field(default_factory=dict)
    rollback_from: dict[str, str] = field(default_factory=dict)
    rolled_back: bool = False
    rollback_steps: list[Step] = field(default_factory=list)
    deployment_id: int | None = None
    interrupted: bool = False
    error: str | None = None
    down: list[str] = field(default_factory=list)
    recovery: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        verified = self.verification is None or self.verification.ok
        steps_ok = all(step.ok for step in self.steps) and self.error is None
        return steps_ok and verified and not self.rolled_back and not self.down

    def to_json(self) -> JsonObject:
        return {
            "action": "restart",
            "ok": self.ok,
            "plan": self.plan,
            "steps": [s.to_json() for s in self.steps],
            "verification": None if self.verification is None else self.verification.to_json(),
            "backups": self.backups,
            "rollback_from": self.rollback_from,
            "rolled_back": self.rolled_back,
            "rollback_steps": [s.to_json() for s in self.rollback_steps],
            "deployment_id": self.deployment_id,
            "interrupted": self.interrupted,
            "error": self.error,
            "down": self.down,
            "recovery": shlex.join(self.recovery) if self.recovery else None,
        }


class DeployInterrupted(asyncio.CancelledError):
    """``up`` or ``restart`` was cancelled (Ctrl-C): a :class:`asyncio.CancelledError` that
    carries the report (what ``up`` stopped; what ``restart`` left down and the command that
    brings it back; which worker a rolling restart left out of the router), already recorded
    in the ledger. Catch it as ``CancelledError``."""

    def __init__(self, report: DeployReport | RestartReport | RollingReport) -> None:
        super().__init__()
        self.report = report


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

    @property
    def ready(self) -> bool:
        return self.readiness is not None and self.readiness.ok

    def to_json(self) -> JsonObject:
        return {
            "service": self.service,
            "role": self.role,
            "host": self.host,
            "url": self.url,
            "pid": self.pid,
            "pid_source": self.pid_source,
            "alive": self.alive,
            "ready": self.ready,
            "readiness": None if self.readiness is None else self.readiness.to_json(),
            "in_router": self.in_router,
            "router_healthy": self.router_healthy,
            "unrecorded": self.unrecorded,
            "error": self.error,
        }
