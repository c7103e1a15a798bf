"""What a deployment's bring-up, stop, co-restart and rolling restart tell while they run (pure).

One frozen dataclass per kind of moment, data only, nothing worded.
Ops tell these through the operation's progress callback (``Operation.say``); :data:`DeployProgress`
is their union, one part of :data:`servelab.core.progress.ProgressEvent`;
:func:`servelab.report.progress.describe_progress` words each one, matching on its type.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.core.deploy.outcomes import StepOutcome
from servelab.core.deploy.relaunch import SettingChange
from servelab.core.deploy.rolling import RollPhase

__all__ = [
    "CoRestarting",
    "DeployProgress",
    "EnvFileRestored",
    "KnobNotAsFile",
    "LaunchTimedOut",
    "OtherDeploymentsRecord",
    "RestartPlanned",
    "RestartingBehind",
    "RollPhaseFailed",
    "RollPhaseStarted",
    "RollingPlanned",
    "RouterNotAsSpec",
    "RouterUntold",
    "ServiceAlreadyUp",
    "ServiceFailed",
    "ServiceReady",
    "ServiceStarted",
    "ServiceStopped",
    "StartCommandOutlived",
    "StopFailed",
    "UnitReloaded",
    "UpLeftServingDown",
    "UpUndone",
    "WasStopping",
]


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
class RouterUntold:
    """Why a ready router this deployment did not start cannot be told whose it is: its worker
    list cannot be read (``missing`` None), or it lists no worker but this spec's and not yet
    ``missing`` of them (a router its workers register with later, one empty included)."""

    missing: tuple[str, ...] | None


@dataclass(frozen=True)
class ServiceAlreadyUp:
    """A service already ran and was ready: left alone (``by_servelab``: its pid record's, or
    servelab's by its mark; ``recorded_again``: its lost pid record was written again)."""

    service: str
    pid: int
    by_servelab: bool
    recorded_again: bool = False
    #: a router this deployment did not start whose deployment cannot be told (``up``)
    untold: RouterUntold | None = None


@dataclass(frozen=True)
class WasStopping:
    """A service's recorded process (``pid``), alive when ``up`` came to it, exited while its
    readiness was waited for: it was stopping (a signal's), so ``up`` starts the service anew."""

    service: str
    pid: int


@dataclass(frozen=True)
class KnobNotAsFile:
    """A service found already up runs ``knob`` at ``live``, another value than its file's
    (``file``; None: unset), as ``knob diff`` reads them; ``fix`` applies the file."""

    service: str
    knob: str
    live: str | None
    file: str | None
    fix: tuple[str, ...]


@dataclass(frozen=True)
class RouterNotAsSpec:
    """A router found already up was launched with other settings than its spec gives now
    (``changes``: each setting, spec vs live, :mod:`servelab.core.deploy.relaunch`); ``fix``
    restarts it."""

    service: str
    changes: tuple[SettingChange, ...]
    fix: tuple[str, ...]


@dataclass(frozen=True)
class OtherDeploymentsRecord:
    """The service's pid record in the state folder is another deployment's (two specs share the
    folder): left alone, neither stopped nor adopted."""

    service: str
    deployment: str
    pid: int
    state_dir: str


@dataclass(frozen=True)
class ServiceStopped:
    """A service was stopped (or was not running); ``stale_record``: why its pid record could not
    be removed once its processes were stopped (it stays, stale)."""

    service: str
    outcome: StepOutcome
    stale_record: str | None = None


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
class UpLeftServingDown:
    """A failed ``up`` stopped ``services`` it had restarted behind what it started: they were
    serving before the run and are now down; ``recovery`` brings them back."""

    services: tuple[str, ...]
    recovery: tuple[str, ...]


@dataclass(frozen=True)
class RestartingBehind:
    """``up`` restarts ``service``, found already running, because it started ``behind`` (what
    ``service`` depends on) under it (:func:`~servelab.core.deploy.topology.started_behind`)."""

    service: str
    behind: tuple[str, ...]


@dataclass(frozen=True)
class RestartPlanned:
    """A co-restart's order."""

    plan: tuple[str, ...]


@dataclass(frozen=True)
class CoRestarting:
    """The changed services and their dependents restart, in this order."""

    order: tuple[str, ...]


@dataclass(frozen=True)
class EnvFileRestored:
    """A rollback put a service's env file back from ``source`` (a backup)."""

    service: str
    source: str


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


DeployProgress = (
    ServiceStarted
    | StartCommandOutlived
    | UnitReloaded
    | LaunchTimedOut
    | ServiceReady
    | ServiceAlreadyUp
    | WasStopping
    | KnobNotAsFile
    | RouterNotAsSpec
    | OtherDeploymentsRecord
    | ServiceStopped
    | StopFailed
    | ServiceFailed
    | RestartingBehind
    | UpUndone
    | UpLeftServingDown
    | RestartPlanned
    | CoRestarting
    | EnvFileRestored
    | RollingPlanned
    | RollPhaseStarted
    | RollPhaseFailed
)
