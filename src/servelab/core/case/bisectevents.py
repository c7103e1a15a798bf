"""What a case's bisection (``case bisect``) tells while it runs (pure).

One frozen dataclass per kind of moment, data only, nothing worded.
Ops tell these through the operation's progress callback (``Operation.say``); :data:`BisectProgress`
is their union, one part of :data:`servelab.core.progress.ProgressEvent`;
:func:`servelab.report.progress.describe_progress` words each one, matching on its type.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BisectPlanned",
    "BisectProgress",
    "BisectResumed",
    "ProbeDecided",
    "ProbeStarted",
]


@dataclass(frozen=True)
class BisectPlanned:
    """``case bisect``: ``changes`` changes between good and bad, the test that tells them
    apart (``soak``, or a threshold such as ``throughput@C64<3000``), at most ``rounds`` rounds
    per probe."""

    case_id: int
    changes: int
    test: str
    rounds: int


@dataclass(frozen=True)
class BisectResumed:
    """A bisection of the case resumes with ``probes`` probes already done."""

    case_id: int
    probes: int


@dataclass(frozen=True)
class ProbeStarted:
    """Probe ``number`` (1-based): the good state with ``changes`` (their labels) applied,
    against the bad state."""

    number: int
    changes: tuple[str, ...]


@dataclass(frozen=True)
class ProbeDecided:
    """Probe ``number`` ended ``outcome`` (good/bad/undecided) after ``rounds`` rounds:
    ``failed``/``units`` of the probe's and ``bad_failed``/``bad_units`` of the bad state's,
    Fisher's ``p_value``."""

    number: int
    outcome: str
    rounds: int
    failed: int
    units: int
    bad_failed: int
    bad_units: int
    p_value: float


BisectProgress = BisectPlanned | BisectResumed | ProbeStarted | ProbeDecided
