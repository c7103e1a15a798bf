"""What a case's revert, restore and verdict experiment (``case test``) tell while they run (pure).

One frozen dataclass per kind of moment, data only, nothing worded.
Ops tell these through the operation's progress callback (``Operation.say``); :data:`CaseProgress`
is their union, one part of :data:`servelab.core.progress.ProgressEvent`;
:func:`servelab.report.progress.describe_progress` words each one, matching on its type.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ArmSoaked",
    "CaseProgress",
    "CaseTestPlanned",
    "KnobPuttingBack",
    "StepFailed",
    "VisitStarted",
]


@dataclass(frozen=True)
class StepFailed:
    """A step of a revert or restore failed (its restart or verify): recorded, not raised."""

    error: str


@dataclass(frozen=True)
class CaseTestPlanned:
    """``case test``: the suspect value against the revert value, ``rounds`` rounds of each in
    ``order`` (arm names), each visit ``sessions`` sessions of ``session_rounds`` rounds (the
    workload of soak ``soak_id``)."""

    target: str
    suspect: str | None
    revert: str | None
    rounds: int
    order: tuple[str, ...]
    sessions: int
    session_rounds: int
    #: None: an answers test (``session_rounds`` its bench runs per visit)
    soak_id: int | None


@dataclass(frozen=True)
class VisitStarted:
    """Visit ``index`` (0-based) of ``total``: arm ``arm``."""

    index: int
    total: int
    arm: str


@dataclass(frozen=True)
class ArmSoaked:
    """An arm's soak ended: ``failed`` of ``sessions`` sessions failed."""

    arm: str
    value: str | None
    failed: int
    sessions: int


@dataclass(frozen=True)
class KnobPuttingBack:
    """The experiment puts the knob back as it found it."""

    service: str
    knob: str
    value: str | None


CaseProgress = StepFailed | CaseTestPlanned | VisitStarted | ArmSoaked | KnobPuttingBack
