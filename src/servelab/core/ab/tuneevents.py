"""What a tune (several arms, successive elimination; ``--screen`` first) tells (pure).

One frozen dataclass per kind of moment, data only, nothing worded.
Ops tell these through the operation's progress callback (``Operation.say``); :data:`TuneProgress`
is their union, one part of :data:`servelab.core.progress.ProgressEvent`;
:func:`servelab.report.progress.describe_progress` words each one, matching on its type.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "PricedFrom",
    "TuneArmKept",
    "TuneEliminated",
    "TuneLevelStopped",
    "TuneOverBudget",
    "TuneProgress",
    "TuneResumed",
    "TuneScreened",
    "TuneStarted",
    "TuneVisitStarted",
]


@dataclass(frozen=True)
class TuneStarted:
    """A tune of ``arms`` arms at ``levels``, at most ``max_rounds`` blocks, recorded as
    ``tune_id`` (what ``tune --resume`` takes; None: no ledger)."""

    tune_id: int | None
    arms: int
    levels: tuple[int, ...]
    max_rounds: int


@dataclass(frozen=True)
class TuneResumed:
    """A recorded tune resumes with ``kept`` visits already done."""

    tune_id: int
    kept: int


@dataclass(frozen=True)
class TuneScreened:
    """``tune --screen``: the screening stopped after ``blocks`` blocks; the tune goes on over
    ``factors`` (none: nothing to tune), the ``fixed`` knobs held at their low value."""

    blocks: int
    factors: tuple[str, ...]
    fixed: tuple[str, ...]


@dataclass(frozen=True)
class TuneVisitStarted:
    """Visit ``index`` (0-based) of ``size`` in block ``block`` of at most ``max_rounds``: arm
    ``arm``, measured at ``levels``."""

    block: int
    max_rounds: int
    index: int
    size: int
    arm: str
    levels: tuple[int, ...]


@dataclass(frozen=True)
class TuneEliminated:
    """At ``level``, ``arm`` was shown worse than ``lost_to`` after ``block``: dropped there."""

    level: int
    arm: str
    block: int
    lost_to: str


@dataclass(frozen=True)
class TuneLevelStopped:
    """The rule stopped at ``level``: why (a ``TuneOutcome`` value), and its winner (None: no
    claim)."""

    level: int
    outcome: str
    winner: str | None


@dataclass(frozen=True)
class TuneArmKept:
    """``tune --keep best``: ``arm`` is made live and left (None: no arm is best at every level,
    the original values are put back); ``unshown``: the best arm, not kept, as the answers gate
    could not show its answers unchanged; ``pair_failed``: the best arm, not kept, as its pair
    layer failed (its engines disagree on the KV hand-off)."""

    arm: str | None
    unshown: str | None = None
    pair_failed: str | None = None


class PricedFrom(StrEnum):
    """Where the price of a tune's visit came from (``ops/ab/budget.py``)."""

    RECORDED = "recorded"  # the latest recorded tune's mean visit
    FIRST_VISIT = "first visit"  # this tune's own first visit


@dataclass(frozen=True)
class TuneOverBudget:
    """The tune's first block (``visits`` visits, at ``visit_s`` each, priced ``priced_from``)
    would take ``first_block_min`` minutes, past ``max_minutes``: it runs whole anyway (the
    budget is checked between blocks); the full design (every block) would take ``full_min``."""

    visits: int
    visit_s: float
    priced_from: PricedFrom
    first_block_min: float
    full_min: float
    max_minutes: float


TuneProgress = (
    TuneStarted
    | TuneResumed
    | TuneScreened
    | TuneVisitStarted
    | TuneEliminated
    | TuneLevelStopped
    | TuneArmKept
    | TuneOverBudget
)
