"""The typed results of ``restart --rolling`` (:mod:`servelab.ops.deploy.rolling`).

- :class:`Phase`: one phase of one worker (:class:`servelab.core.deploy.rolling.RollPhase`): ok,
  time, and what it saw (:data:`PhaseData`, one type per phase and way it ends; a failed phase's
  ``reason``: a :class:`PhaseFailure`). Its JSON is the phase's own keys beside ``phase``,
  ``ok`` and ``elapsed_s``, through the codec (a key absent before stays absent).
- :class:`WorkerRoll`: one worker's phases, its verification, and where it was left.
- :class:`RollingReport`: the plan, every worker's roll, and, when it stopped, the worker left out
  of the router (and whether it is down) with the commands that put it back.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from servelab.core.deploy.rolling import RollPhase, RollTarget
from servelab.core.deploy.steps import Step
from servelab.core.ledger.codec import JsonObject, encode
from servelab.core.verify.checks import CheckCode
from servelab.core.verify.contract import VerifyReport
from servelab.io.routerworkers import RouterWorker

__all__ = [
    "Added",
    "AlreadyOut",
    "Drained",
    "Phase",
    "PhaseData",
    "PhaseError",
    "PhaseFailure",
    "RemoveRefused",
    "Removed",
    "Restarted",
    "RollingReport",
    "RoutedByCount",
    "RoutedByListing",
    "Verified",
    "WorkerRoll",
]


class PhaseFailure(StrEnum):
    """Why a phase failed (its data's ``reason``; worded in :mod:`servelab.report.deploy`)."""

    NO_OTHER_WORKER = "no_other_worker"  # remove: no other healthy worker of its role is listed
    STILL_LISTED = "still_listed"  # remove: the router still lists it
    NOT_DRAINED = "not_drained"  # drain: requests still running
    LOAD_UNREADABLE = "load_unreadable"  # drain: no running-request count in /get_load
    NOT_LISTED = "not_listed"  # add: the router does not list it healthy
    NOT_ROUTED = "not_routed"  # routed: its served-request counter did not grow
    ERROR = "error"  # an error stopped the phase (``error``)


@dataclass(frozen=True)
class RemoveRefused:
    """remove: refused, no other healthy worker of its role is listed (the ids the router gave
    it, the other workers' URLs)."""

    worker_ids: tuple[str, ...]
    others: tuple[str, ...]
    reason: PhaseFailure = PhaseFailure.NO_OTHER_WORKER


@dataclass(frozen=True)
class AlreadyOut:
    """remove: the router did not list it (nothing to remove)."""

    worker_ids: tuple[str, ...]
    others: tuple[str, ...]
    already_out: Literal[True] = True


@dataclass(frozen=True)
class Removed:
    """remove: asked the router to drop it, then polled its list ``polls`` times, for at most
    ``timeout_s``; ``reason`` STILL_LISTED when it still listed it."""

    worker_ids: tuple[str, ...]
    others: tuple[str, ...]
    polls: int
    timeout_s: float
    reason: PhaseFailure | None = None


@dataclass(frozen=True)
class Drained:
    """drain: the running requests last read (None: ``/get_load`` did not say), the polls."""

    running: int | None
    polls: int
    timeout_s: float
    reason: PhaseFailure | None = None


@dataclass(frozen=True)
class Restarted:
    """restart: the worker's own restart step (stored as the step's JSON)."""

    step: Step


@dataclass(frozen=True)
class Verified:
    """verify: the codes of the checks that failed (the checks are the worker's verification)."""

    failures: tuple[CheckCode, ...]


@dataclass(frozen=True)
class Added:
    """add: the id the router answered with, how it listed the worker when last polled."""

    worker_id: str | None
    listed: tuple[RouterWorker, ...]
    polls: int
    timeout_s: float
    reason: PhaseFailure | None = None


@dataclass(frozen=True)
class RoutedByListing:
    """routed: the worker has no served-request counter; the router's listing is the evidence."""

    served_before: None = None
    evidence: Literal["listed"] = "listed"


@dataclass(frozen=True)
class RoutedByCount:
    """routed: its served-request counter before and when last read, the probes' statuses."""

    served_before: int
    served_after: int | None
    polls: int
    timeout_s: float
    probe_statuses: tuple[int | None, ...]
    reason: PhaseFailure | None = None


@dataclass(frozen=True)
class PhaseError:
    """An error stopped the phase: its type and message."""

    reason: PhaseFailure = field(default=PhaseFailure.ERROR, kw_only=True)
    error: str


#: What a phase saw.
PhaseData = (
    RemoveRefused
    | AlreadyOut
    | Removed
    | Drained
    | Restarted
    | Verified
    | Added
    | RoutedByListing
    | RoutedByCount
    | PhaseError
)


@dataclass(frozen=True)
class Phase:
    """One phase of one worker's roll: its name, outcome, time taken and what it saw."""

    name: RollPhase
    ok: bool
    elapsed_s: float
    data: PhaseData

    def to_json(self) -> JsonObject:
        return {"phase": self.name.value, "ok": self.ok, "elapsed_s": round(self.elapsed_s, 3),
                **encode(self.data)}  # fmt: skip


@dataclass
class WorkerRoll:
    """One worker: the phases it went through (in order, the last failed when it stopped)."""

    target: RollTarget
    phases: list[Phase] = field(default_factory=list)
    verification: VerifyReport | None = None

    @property
    def service(self) -> str:
        return self.target.service

    @property
    def ok(self) -> bool:
        return len(self.phases) == len(RollPhase) and all(phase.ok for phase in self.phases)

    @property
    def failed(self) -> Phase | None:
        return next((phase for phase in self.phases if not phase.ok), None)

    def _reached(self, name: RollPhase) -> bool:
        return any(phase.name == name for phase in self.phases)

    @property
    def out_of_router(self) -> bool:
        """Removed from the router and not (provably) added back."""
        added = any(phase.name is RollPhase.ADD and phase.ok for phase in self.phases)
        return self._reached(RollPhase.REMOVE) and not added

    @property
    def down(self) -> bool:
        """Its restart began and did not end ready."""
        restart = next((p for p in self.phases if p.name is RollPhase.RESTART), None)
        return restart is not None and not restart.ok

    def to_json(self) -> JsonObject:
        verification = self.verification
        return {
            "service": self.service,
            "role": self.target.role,
            "url": self.target.url,
            "ok": self.ok,
            "phases": [phase.to_json() for phase in self.phases],
            "verification": None if verification is None else encode(verification),
        }


@dataclass
class RollingReport:
    """The result of ``restart --rolling``: each worker's roll, in order; when it stopped, which
    worker it left out of the router (``out``), whether that worker is ``down``, and ``recovery``:
    the commands that put it back."""

    plan: list[RollTarget]
    router: str
    router_url: str = ""
    workers: list[WorkerRoll] = field(default_factory=list)
    error: str | None = None
    interrupted: bool = False
    out: str | None = None
    down: bool = False
    recovery: list[list[str]] = field(default_factory=list)
    deployment_id: int | None = None

    @property
    def ok(self) -> bool:
        done = len(self.workers) == len(self.plan)
        return done and all(roll.ok for roll in self.workers) and self.error is None

    def to_json(self) -> JsonObject:
        return {
            "action": "restart --rolling",
            "ok": self.ok,
            "plan": [target.service for target in self.plan],
            "router": self.router,
            "router_url": self.router_url,
            "workers": [roll.to_json() for roll in self.workers],
            "error": self.error,
            "interrupted": self.interrupted,
            "out": self.out,
            "down": self.down,
            "recovery": [shlex.join(command) for command in self.recovery],
            "deployment_id": self.deployment_id,
        }
