"""What ``servelab investigate`` tells while it runs (pure data; worded by
:func:`servelab.report.investigate.describe_event`).

The commands it composes tell their own events (a soak's, a ``case test``'s, a restart's) through
the operation's progress; these are the loop's own moments, told through the investigation's
callback.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.core.investigate.slow import Slowdown, SmallBaseline
from servelab.core.investigate.state import Ending, Side, Stage, SuspectChange

__all__ = [
    "BudgetSpent",
    "ExperimentRestarts",
    "ExperimentStarted",
    "InvestigateEvent",
    "Localized",
    "Reproduced",
    "Resumed",
    "SlowMeasured",
    "StageStarted",
    "SuspectsListed",
    "Verdict",
]


@dataclass(frozen=True)
class StageStarted:
    stage: Stage
    case_id: int


@dataclass(frozen=True)
class Resumed:
    case_id: int
    stage: Stage
    decided: int


@dataclass(frozen=True)
class Reproduced:
    reproduced: bool
    soak_id: int | None
    failed: int
    units: int


@dataclass(frozen=True)
class SlowMeasured:
    """``--symptom slow``: the reproduction against the baseline (None: no usable baseline
    recorded; ``skipped``: then the recorded ones too small to compare with)."""

    slowdown: Slowdown | None
    skipped: tuple[SmallBaseline, ...] = ()


@dataclass(frozen=True)
class Localized:
    layer: str | None
    worker: str | None
    side: Side
    verification_id: int | None


@dataclass(frozen=True)
class SuspectsListed:
    since: str | None
    suspects: tuple[SuspectChange, ...]


@dataclass(frozen=True)
class ExperimentStarted:
    """An experiment begins: ``how`` is ``case test`` or ``bisect``; ``targets`` what it decides."""

    how: str
    targets: tuple[str, ...]


@dataclass(frozen=True)
class ExperimentRestarts:
    """What an experiment will co-restart (asked first unless ``--yes``): ``how`` (``case
    test``, ``ab``, ``good state``, ``bisect``), the ``targets`` it decides, the ``services`` in
    their restart order (each arm, each probe restarts them)."""

    how: str
    targets: tuple[str, ...]
    services: tuple[str, ...]


@dataclass(frozen=True)
class Verdict:
    target: str
    outcome: str
    p_value: float | None


@dataclass(frozen=True)
class BudgetSpent:
    """``--max-minutes`` reached before ``stage``: stopped, its state kept."""

    minutes: float
    stage: Stage
    ending: Ending | None


InvestigateEvent = (
    StageStarted
    | Resumed
    | Reproduced
    | SlowMeasured
    | Localized
    | SuspectsListed
    | ExperimentStarted
    | Verdict
    | BudgetSpent
)
