"""The typed results of ``up``/``down``/``restart``/``status`` (:mod:`servelab.ops.deploy.deploy`).

- :class:`Step`: what happened to one service (outcome, pid, time, evidence).
- :data:`StepEvidence`: what a step saw, one type per way it ends: :class:`Ready` (the readiness
  gate of a process), :class:`CommandReady` (of a start command), :class:`LaunchTimeoutReady`,
  :class:`FoundServing` (a ready process on its port, no record), :class:`Stopped`,
  :class:`StepFailure`. Stored as the step's ``evidence`` through the codec: a key absent from a
  step's JSON before stays absent (``OMITTED_IF_NONE``).
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
from typing import Annotated, Literal

from servelab.core.deploy.outcomes import StepOutcome
from servelab.core.ledger.codec import OMITTED_IF_NONE, JsonObject, encode
from servelab.io.http.client import ProbeResult
from servelab.ops.deploy.rolling_results import RollingReport
from servelab.ops.verify.verify import VerifyReport

__all__ = [
    "CommandReady",
    "DeployInterrupted",
    "DeployReport",
    "FoundServing",
    "LaunchTimeoutReady",
    "PortOwner",
    "Ready",
    "RestartReport",
    "ServiceStatus",
    "Step",
    "StepEvidence",
    "StepFailure",
    "Stopped",
    "UnrecordedStop",
]


@dataclass(frozen=True)
class Ready:
    """The readiness gate passed: the last probe's answer, how many probes, where the log is
    (``host:path``)."""

    readiness: ProbeResult | None
    probes: int
    log: str


@dataclass(frozen=True)
class CommandReady(Ready):
    """The readiness gate of a service a shell start command launched: the command's exit status
    (None: still running), whether it is a foreground command, and, when it outlived its
    ``start_timeout_s`` (the step says "command timed out; service healthy"), that timeout."""

    command_exit: int | None = None
    foreground: bool = False
    command_timeout_s: Annotated[float | None, OMITTED_IF_NONE] = None


@dataclass(frozen=True)
class LaunchTimeoutReady(Ready):
    """The launch command itself timed out (an SSH session that would not close); readiness
    decided."""

    launch_timed_out: Literal[True] = True


@dataclass(frozen=True)
class FoundServing:
    """A ready process already serves the service's port and had no pid record; recorded again
    when it carries servelab's mark."""

    readiness: ProbeResult
    pid_source: Literal["port owner"] = "port owner"
    recorded_again: Annotated[Literal[True] | None, OMITTED_IF_NONE] = None


@dataclass(frozen=True)
class PortOwner:
    """A process without servelab's mark serving the port: named, never touched."""

    pid: int
    launched_by_servelab: Literal[False] = False


@dataclass(frozen=True)
class UnrecordedStop:
    """A process with servelab's mark but no pid record, stopped: its pid, group and outcome."""

    pid: int
    pgid: int
    outcome: StepOutcome


@dataclass(frozen=True)
class Stopped:
    """What stopping a service saw: the stop command's exit status, or why it did not end
    (``stop_command``: its timeout), a stranger on the port, an unrecorded process stopped, and
    the pid of one of servelab's that still serves (the step failed)."""

    stop_command_exit: Annotated[int | None, OMITTED_IF_NONE] = None
    stop_command: Annotated[str | None, OMITTED_IF_NONE] = None
    port_owner: Annotated[PortOwner | None, OMITTED_IF_NONE] = None
    unrecorded: Annotated[UnrecordedStop | None, OMITTED_IF_NONE] = None
    still_serving: Annotated[int | None, OMITTED_IF_NONE] = None


@dataclass(frozen=True)
class StepFailure:
    """The step failed with an error (a start that did not come up, a stop that raised)."""

    error: str


#: What a step saw; its JSON is the step's ``evidence``.
StepEvidence = Ready | CommandReady | LaunchTimeoutReady | FoundServing | Stopped | StepFailure


@dataclass
class Step:
    """What happened to one service: outcome, pid, time taken, and the evidence."""

    service: str
    outcome: StepOutcome
    pid: int | None
    elapsed_s: float
    evidence: StepEvidence

    @property
    def ok(self) -> bool:
        return self.outcome.ok

    def to_json(self) -> JsonObject:
        return {
            "service": self.service,
            "outcome": self.outcome.value,
            "pid": self.pid,
            "elapsed_s": round(self.elapsed_s, 3),
            "evidence": encode(self.evidence),
        }


@dataclass
class DeployReport:
    """The result of ``up`` or ``down``; a failed ``up`` also says why and what it stopped."""

    action: str
    steps: list[Step]
    deployment_id: int | None = None
    error: str | None = None
    interrupted: bool = False
    stopped: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(step.ok for step in self.steps) and self.error is None

    def to_json(self) -> JsonObject:
        return {
            "action": self.action,
            "ok": self.ok,
            "deployment_id": self.deployment_id,
            "steps": [step.to_json() for step in self.steps],
            "error": self.error,
            "interrupted": self.interrupted,
            "stopped": self.stopped,
        }


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
