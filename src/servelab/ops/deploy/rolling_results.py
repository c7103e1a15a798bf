"""The typed results of ``restart --rolling`` (:mod:`servelab.ops.deploy.rolling`).

- :class:`Phase`: one phase of one worker (:class:`servelab.core.deploy.rolling.RollPhase`): ok,
  time, and what it saw (:data:`PhaseData`, one type per phase and way it ends; a failed phase's
  ``reason``: a :class:`PhaseFailure`). Its JSON is the phase's own keys beside ``phase``,
  ``ok`` and ``elapsed_s`` (a key absent before stays absent).
- :class:`WorkerRoll`: one worker's phases, its verification, and where it was left.
- :class:`RollingReport`: the plan, every worker's roll, and, when it stopped, the worker left out
  of the router (and whether it is down) with the commands that put it back.

Each is written by the one codec (``encode(report)``: what the ledger's deployment row holds and
``restart --rolling --json`` prints), in the shape the hand-written JSON had: the serializers
below only flatten a phase's data, add the derived ``ok`` (and the roll's ``action``) in front,
and name the plan's services and the recovery's shell lines.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Literal, TypeAlias

from pydantic import (
    Field,
    JsonValue,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from servelab.core.deploy.rolling import RollPhase, RollTarget
from servelab.core.deploy.steps import Step
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


def _ms_precision(seconds: float) -> float:
    return round(seconds, 3)


def _services(plan: list[RollTarget]) -> list[str]:
    return [target.service for target in plan]


def _shell_lines(recovery: list[list[str]]) -> list[str]:
    return [shlex.join(command) for command in recovery]


#: A part of the report as JSON (the serializers' own keys merged with the fields' encoding).
Flat: TypeAlias = Mapping[str, JsonValue]


@dataclass(frozen=True)
class Phase:
    """One phase of one worker's roll: its name, outcome, time taken and what it saw."""

    name: Annotated[RollPhase, Field(alias="phase")]
    ok: bool
    elapsed_s: Annotated[float, PlainSerializer(_ms_precision)]
    data: PhaseData

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler) -> Flat:
        """``phase``, ``ok``, ``elapsed_s``, then the data's own keys (no ``data`` key)."""
        doc: dict[str, JsonValue] = handler(self)
        data = doc.pop("data")  # a dataclass's encoding: always an object
        return {**doc, **(data if isinstance(data, dict) else {})}


@dataclass
class WorkerRoll:
    """One worker: the phases it went through (in order, the last failed when it stopped)."""

    target: Annotated[RollTarget, Field(exclude=True)]
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

    @model_serializer(mode="wrap")
    def _with_target(self, handler: SerializerFunctionWrapHandler) -> Flat:
        """The worker (``service``, ``role``, ``url``) and ``ok`` before its phases."""
        target = self.target
        head: Flat = {
            "service": target.service,
            "role": target.role,
            "url": target.url,
            "ok": self.ok,
        }
        return {**head, **handler(self)}


@dataclass
class RollingReport:
    """The result of ``restart --rolling``: each worker's roll, in order; when it stopped, which
    worker it left out of the router (``out``), whether that worker is ``down``, and ``recovery``:
    the commands that put it back."""

    plan: Annotated[list[RollTarget], PlainSerializer(_services)]
    router: str
    router_url: str = ""
    workers: list[WorkerRoll] = field(default_factory=list)
    error: str | None = None
    interrupted: bool = False
    out: str | None = None
    down: bool = False
    recovery: Annotated[list[list[str]], PlainSerializer(_shell_lines)] = field(
        default_factory=list
    )
    deployment_id: int | None = None

    @property
    def ok(self) -> bool:
        done = len(self.workers) == len(self.plan)
        return done and all(roll.ok for roll in self.workers) and self.error is None

    @model_serializer(mode="wrap")
    def _with_action(self, handler: SerializerFunctionWrapHandler) -> Flat:
        """``action`` and ``ok`` before the report's fields."""
        return {"action": "restart --rolling", "ok": self.ok, **handler(self)}
