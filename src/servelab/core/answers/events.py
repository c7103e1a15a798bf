"""What checking answers tells while it runs (pure: one frozen dataclass per moment, data only);
:func:`servelab.report.progress.describe_progress` words them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "AnswersProgress",
    "ArmAnswered",
    "ArmDropped",
    "ReferencesReused",
    "ReferencesTaken",
]


@dataclass(frozen=True)
class ReferencesTaken:
    """Reference answers were taken from the baseline state (``n`` probes at ``concurrency``)."""

    key: str
    n: int
    concurrency: int


@dataclass(frozen=True)
class ArmAnswered:
    """A case test's arm ``arm`` (``value``) answered its probes: ``wrong`` of ``answers`` wrong
    (None: judged at the end, its references not taken yet); ``cut``: probes cut by the run's
    end, in neither count (never judged)."""

    arm: str
    value: str | None
    wrong: int | None
    answers: int
    cut: int = 0


@dataclass(frozen=True)
class ArmDropped:
    """``arm`` changes answers against ``baseline`` (``wrong`` of ``n`` paired answers against
    ``baseline_wrong``): dropped from the experiment, never a win."""

    arm: str
    baseline: str
    wrong: int
    baseline_wrong: int
    n: int


@dataclass(frozen=True)
class ReferencesReused:
    """Reference answers of the same state were found in the ledger (``id``) and reused."""

    key: str
    id: int
    n: int


AnswersProgress = ReferencesTaken | ReferencesReused | ArmDropped | ArmAnswered
