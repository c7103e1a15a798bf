"""What an A/B tells while it runs (pure).

One frozen dataclass per kind of moment, data only, nothing worded.
Ops tell these through the operation's progress callback (``Operation.say``); :data:`AbProgress`
is their union, one part of :data:`servelab.core.progress.ProgressEvent`;
:func:`servelab.report.progress.describe_progress` words each one, matching on its type.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "AbJournalStarted",
    "AbProgress",
    "AbResumed",
    "AbVisitStarted",
    "KnobKept",
    "KnobRestoring",
]


@dataclass(frozen=True)
class AbJournalStarted:
    """The A/B is journalled as ``session_id`` (what ``ab --resume`` takes, with ``spec_args``
    naming the spec)."""

    session_id: int
    spec_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class AbResumed:
    """A journalled A/B resumes with ``kept`` visits already done."""

    session_id: int
    kept: int


@dataclass(frozen=True)
class AbVisitStarted:
    """A visit of an arm: round ``round_index`` (0-based) of ``rounds``, whose arms go
    ``first`` then ``second``; this visit sets ``knob`` to ``value``."""

    round_index: int
    rounds: int
    first: str
    second: str
    knob: str
    value: str


@dataclass(frozen=True)
class KnobKept:
    """An A/B leaves ``value`` live at its end (``ab --keep``; ``rule``: what ``--keep`` said:
    ``better``, ``baseline``, ``candidate``, or the value itself)."""

    service: str
    knob: str
    value: str
    rule: str


@dataclass(frozen=True)
class KnobRestoring:
    """The A/B puts the knob's original value back (None: unset)."""

    service: str
    knob: str
    value: str | None


AbProgress = AbJournalStarted | AbResumed | AbVisitStarted | KnobKept | KnobRestoring
