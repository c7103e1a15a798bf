"""What an operation tells while it runs: one frozen dataclass per kind of moment, data only.

Ops emit these through the operation's progress callback (:data:`servelab.ops.context.Progress`);
:func:`servelab.report.progress.describe_progress` words each one (matching on its type), and the
CLI prints that line on stderr. Nothing here is worded.

A bench run's progress is a stream of its own (:class:`servelab.ops.bench.bench.BenchProgress`,
many counter updates a second that drive a bar, through the bench's own callback); it is typed the
same way, and :func:`servelab.report.progress.describe_level` words the line a measured level gets.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.core.answers.contract import (
    ArmAnswered,
    ArmDropped,
    ReferencesReused,
    ReferencesTaken,
)
from servelab.core.deploy.outcomes import StepOutcome
from servelab.core.deploy.rolling import RollPhase
from servelab.core.soak.signatures import Phase, Signature
from servelab.core.verify.coldstart import StartClass

__all__ = [
    "AbJournalStarted",
    "AbResumed",
    "AbVisitStarted",
    "ArmSoaked",
    "BisectPlanned",
    "BisectResumed",
    "CaseTestPlanned",
    "CoRestarting",
    "EnginesStarted",
    "EnvFileRestored",
    "KnobKept",
    "KnobPuttingBack",
    "KnobRestoring",
    "KnobSetting",
    "KnobVerifiedLive",
    "LaunchTimedOut",
    "Localizing",
    "ProbeDecided",
    "ProbeStarted",
    "ProbingE2E",
    "ProbingHealth",
    "ProbingWorkers",
    "ProgressEvent",
    "ReadingEnvFile",
    "ReadingLiveEnv",
    "RequestResent",
    "RestartPlanned",
    "RollPhaseFailed",
    "RollPhaseStarted",
    "RollingPlanned",
    "ServiceAlreadyUp",
    "ServiceFailed",
    "ServiceReady",
    "ServiceStarted",
    "ServiceStopped",
    "SoakDeadlineReached",
    "SoakStarted",
    "StallSeen",
    "StartCommandOutlived",
    "StepFailed",
    "StopFailed",
    "StreamHeld",
    "TuneArmKept",
    "TuneEliminated",
    "TuneLevelStopped",
    "TuneResumed",
    "TuneScreened",
    "TuneStarted",
    "TuneVisitStarted",
    "UnitReloaded",
    "UpUndone",
    "VerifyingLayers",
    "VisitStarted",
]


# -- a service starting, ready, stopped ------------------------------------------------------------


@dataclass(frozen=True)
class ServiceStarted:
    """A service's process was launched (not yet ready)."""

    service: str
    pid: int
    host: str
    log: str


@dataclass(frozen=True)
class StartCommandOutlived:
    """A shell start command still ran after ``timeout_s``, but the service answered ready."""

    service: str
    timeout_s: float


@dataclass(frozen=True)
class UnitReloaded:
    """The service's systemd unit changed on disk; servelab ran ``systemctl daemon-reload``
    before starting it (``manage_unit``)."""

    service: str
    unit: str


@dataclass(frozen=True)
class LaunchTimedOut:
    """The launch command itself timed out on ``host``: readiness at ``url`` decides."""

    service: str
    host: str
    url: str


@dataclass(frozen=True)
class ServiceReady:
    """A started service is ready (``outcome``: ok, or its command timed out but it is healthy)."""

    service: str
    outcome: StepOutcome
    elapsed_s: float


@dataclass(frozen=True)
class ServiceAlreadyUp:
    """A service already ran and was ready: left alone (``by_servelab``: its pid record's, or
    servelab's by its mark; ``recorded_again``: its lost pid record was written again)."""

    service: str
    pid: int
    by_servelab: bool
    recorded_again: bool = False


@dataclass(frozen=True)
class ServiceStopped:
    """A service was stopped (or was not running)."""

    service: str
    outcome: StepOutcome


@dataclass(frozen=True)
class StopFailed:
    """Stopping a service in a cleanup path failed (the cleanup goes on)."""

    service: str
    error: str


@dataclass(frozen=True)
class ServiceFailed:
    """A service of a co-restart did not start (the restart stops there)."""

    service: str
    error: str


@dataclass(frozen=True)
class UpUndone:
    """``up`` failed or was interrupted: it stops what it started (``stopping``, newest first)."""

    interrupted: bool
    stopping: tuple[str, ...]


@dataclass(frozen=True)
class RestartPlanned:
    """A co-restart's order."""

    plan: tuple[str, ...]


@dataclass(frozen=True)
class EnvFileRestored:
    """A rollback put a service's env file back from ``source`` (a backup)."""

    service: str
    source: str


# -- a rolling restart ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RollingPlanned:
    """A rolling restart's workers, in order."""

    services: tuple[str, ...]


@dataclass(frozen=True)
class RollPhaseStarted:
    """A worker enters a phase of its roll."""

    service: str
    phase: RollPhase


@dataclass(frozen=True)
class RollPhaseFailed:
    """A worker's phase failed: the roll stops there."""

    service: str
    phase: RollPhase


# -- verify --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadingEnvFile:
    """The config layer reads a service's env file."""

    service: str


@dataclass(frozen=True)
class ReadingLiveEnv:
    """The live layer reads the environment of a service's process."""

    service: str


@dataclass(frozen=True)
class ProbingHealth:
    """The health layer probes a service's readiness ``path``."""

    service: str
    path: str


@dataclass(frozen=True)
class ProbingE2E:
    """The e2e layer sends its chat completion through the entry point."""

    entry: str


@dataclass(frozen=True)
class ProbingWorkers:
    """xPyD: the e2e layer sends requests through the router until every worker is reached."""

    router: str


# -- a knob set, restarted, verified (ab, case) --------------------------------------------------


@dataclass(frozen=True)
class KnobSetting:
    """A knob is being set in its env file (``value`` None: removed)."""

    service: str
    knob: str
    value: str | None


@dataclass(frozen=True)
class CoRestarting:
    """The changed services and their dependents restart, in this order."""

    order: tuple[str, ...]


@dataclass(frozen=True)
class VerifyingLayers:
    """A verification of these layers begins."""

    layers: tuple[str, ...]


@dataclass(frozen=True)
class KnobVerifiedLive:
    """An arm's knob value is proven live (config, live and e2e passed; read back from the
    process), by verification ``verification_id``."""

    service: str
    knob: str
    value: str | None
    verification_id: int | None


@dataclass(frozen=True)
class StepFailed:
    """A step of a revert or restore failed (its restart or verify): recorded, not raised."""

    error: str


# -- an A/B ----------------------------------------------------------------------------------------


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


# -- a case's verdict experiment -------------------------------------------------------------------


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


# -- a tune ----------------------------------------------------------------------------------------


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
    the original values are put back)."""

    arm: str | None


# -- a case's bisection ----------------------------------------------------------------------------


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


# -- a soak ----------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class TuneScreened:
    """``tune --screen``: the screening stopped after ``blocks`` blocks; the tune goes on over
    ``factors`` (none: nothing to tune), the ``fixed`` knobs held at their low value."""

    blocks: int
    factors: tuple[str, ...]
    fixed: tuple[str, ...]


ProgressEvent = (
    ServiceStarted | StartCommandOutlived | LaunchTimedOut | ServiceReady | ServiceAlreadyUp
    | ServiceStopped | StopFailed | ServiceFailed | UpUndone | RestartPlanned | EnvFileRestored
    | UnitReloaded | RollingPlanned | RollPhaseStarted | RollPhaseFailed
    | ReadingEnvFile | ReadingLiveEnv | ProbingHealth | ProbingE2E | ProbingWorkers
    | KnobSetting | CoRestarting | VerifyingLayers | KnobVerifiedLive | StepFailed
    | AbJournalStarted | AbResumed | AbVisitStarted | KnobRestoring | KnobKept
    | CaseTestPlanned | VisitStarted | ArmSoaked | KnobPuttingBack
    | TuneStarted | TuneResumed | TuneVisitStarted | TuneEliminated | TuneLevelStopped
    | TuneArmKept | BisectPlanned | BisectResumed | ProbeStarted | ProbeDecided
    | SoakStarted | EnginesStarted | RequestResent | StallSeen | Localizing | StreamHeld
    | SoakDeadlineReached
    | TuneScreened
    | ReferencesTaken | ReferencesReused | ArmDropped | ArmAnswered
)  # fmt: skip
