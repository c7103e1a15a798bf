"""What a soak and its localization tell while they run (pure).

One frozen dataclass per kind of moment, data only, nothing worded.
Ops tell these through the operation's progress callback (``Operation.say``); :data:`SoakProgress`
is their union, one part of :data:`servelab.core.progress.ProgressEvent`;
:func:`servelab.report.progress.describe_progress` words each one, matching on its type.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.core.soak.signatures import Phase, Signature
from servelab.core.verify.coldstart import StartClass

__all__ = [
    "EnginesStarted",
    "Localizing",
    "RequestResent",
    "SoakDeadlineReached",
    "SoakProgress",
    "SoakStarted",
    "StallSeen",
    "StreamHeld",
]


@dataclass(frozen=True)
class SoakStarted:
    """The soak's sessions begin: ``sessions`` of ``rounds`` rounds through ``entry``, on
    ``connection`` connections (``reuse`` or ``fresh``)."""

    sessions: int
    rounds: int
    entry: str
    connection: str


@dataclass(frozen=True)
class EnginesStarted:
    """The warm-up classified the engines' start (cold, warm or unknown, and why)."""

    start: StartClass


@dataclass(frozen=True)
class RequestResent:
    """The client sent round ``round`` of ``session`` again (a resend it made on its own)."""

    session: int
    round: int


@dataclass(frozen=True)
class StallSeen:
    """Round ``round`` of ``session`` stalled (session -1: the determinism probe) after
    ``carried`` requests on its connection, with a payload of ``payload_bytes``, in ``phase``."""

    session: int
    round: int
    carried: int
    payload_bytes: int
    phase: Phase


@dataclass(frozen=True)
class Localizing:
    """A localization of ``signature`` begins: its payload replayed through every hop."""

    signature: Signature


@dataclass(frozen=True)
class StreamHeld:
    """The largest payload answered (round ``round`` of ``session``) was held by the entry."""

    session: int
    round: int


@dataclass(frozen=True)
class SoakDeadlineReached:
    """The soak's deadline cut its sessions (their partial results are kept)."""


SoakProgress = (
    SoakStarted
    | EnginesStarted
    | RequestResent
    | StallSeen
    | Localizing
    | StreamHeld
    | SoakDeadlineReached
)
