"""Progress in words: one line per event an operation tells (returns str, no I/O).

:mod:`servelab.ops.progress` holds the events (data only); :func:`describe_progress` words each
kind, matching on its type (mypy names a kind left out), and the CLI prints the line on stderr.
:func:`describe_level` words the one line a bench level gets when its progress is shown as lines
(an A/B's arms) rather than as a bar.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, assert_never

from servelab.ops.progress import (
    AbJournalStarted,
    AbResumed,
    AbVisitStarted,
    ArmSoaked,
    CaseTestPlanned,
    CoRestarting,
    EnvFileRestored,
    KnobPuttingBack,
    KnobRestoring,
    KnobSetting,
    KnobVerifiedLive,
    LaunchTimedOut,
    ProbingE2E,
    ProbingHealth,
    ProbingWorkers,
    ProgressEvent,
    ReadingEnvFile,
    ReadingLiveEnv,
    RestartPlanned,
    RollingPlanned,
    RollPhaseFailed,
    RollPhaseStarted,
    ServiceAlreadyUp,
    ServiceFailed,
    ServiceReady,
    ServiceStarted,
    ServiceStopped,
    StartCommandOutlived,
    StepFailed,
    StopFailed,
    UnitReloaded,
    UpUndone,
    VerifyingLayers,
    VisitStarted,
)
from servelab.report.text import level_label

if TYPE_CHECKING:  # the bench's modules cost every command ~0.7 s to import; only its type is used
    from servelab.ops.bench.bench import BenchProgress

__all__ = ["describe_level", "describe_progress"]


def describe_progress(event: ProgressEvent) -> str:
    """The event as one line."""
    match event:
        case (
            ServiceStarted() | StartCommandOutlived() | LaunchTimedOut() | ServiceReady()
            | ServiceAlreadyUp() | ServiceStopped() | StopFailed() | ServiceFailed() | UpUndone()
            | RestartPlanned() | EnvFileRestored() | UnitReloaded() | RollingPlanned()
            | RollPhaseStarted() | RollPhaseFailed()
        ):  # fmt: skip
            return _deploy(event)
        case ReadingEnvFile(service=service):
            return f"reading the env file of {service}"
        case ReadingLiveEnv(service=service):
            return f"reading the live environment of {service}"
        case ProbingHealth(service=service, path=path):
            return f"probing {service} {path}"
        case ProbingE2E(entry=entry):
            return f"e2e probe through {entry}"
        case ProbingWorkers(router=router):
            return f"e2e: every worker reached through {router}"
        case _:
            return _knob(event)


def _deploy(
    event: ServiceStarted | StartCommandOutlived | LaunchTimedOut | ServiceReady
    | ServiceAlreadyUp | ServiceStopped | StopFailed | ServiceFailed | UpUndone | RestartPlanned
    | EnvFileRestored | UnitReloaded | RollingPlanned | RollPhaseStarted | RollPhaseFailed,
) -> str:  # fmt: skip
    match event:
        case ServiceStarted(service=service, pid=pid, host=host, log=log):
            return f"{service}: started pid {pid} on {host} (log {log})"
        case StartCommandOutlived(service=service, timeout_s=timeout_s):
            still = f"start command still running after {timeout_s}s"
            return f"{service}: {still}, but the service is ready"
        case LaunchTimedOut(service=service, host=host, url=url):
            return f"{service}: its launch command timed out on {host}; probing readiness at {url}"
        case ServiceReady(service=service, outcome=outcome, elapsed_s=elapsed_s):
            return f"{service}: {outcome} in {elapsed_s:.1f}s"
        case ServiceAlreadyUp(service=service, pid=pid, by_servelab=True):
            return f"{service}: already up (pid {pid})"
        case ServiceAlreadyUp(service=service, pid=pid):
            return f"{service}: already up (pid {pid}, not started by servelab)"
        case ServiceStopped(service=service, outcome=outcome):
            return f"{service}: {outcome}"
        case StopFailed(service=service, error=error):
            return f"{service}: could not stop: {error}"
        case ServiceFailed(service=service, error=error):
            return f"{service}: failed: {error}"
        case UpUndone(interrupted=interrupted, stopping=stopping):
            what = "up interrupted" if interrupted else "up failed"
            return f"{what}; stopping what this run started: {', '.join(stopping) or 'nothing'}"
        case RestartPlanned(plan=plan):
            return f"restart plan: {' -> '.join(plan)}"
        case EnvFileRestored(service=service, source=source):
            return f"{service}: env file restored from {source}"
        case UnitReloaded(service=service, unit=unit):
            return f"{service}: systemd unit {unit} changed on disk; ran systemctl daemon-reload"
        case RollingPlanned(services=services):
            return f"rolling restart: {' -> '.join(services)}"
        case RollPhaseStarted(service=service, phase=phase):
            return f"{service}: {phase}"
        case RollPhaseFailed(service=service, phase=phase):
            return f"{service}: {phase} failed"
        case _:
            assert_never(event)


def _knob(
    event: KnobSetting | CoRestarting | VerifyingLayers | KnobVerifiedLive | StepFailed
    | AbJournalStarted | AbResumed | AbVisitStarted | KnobRestoring | CaseTestPlanned
    | VisitStarted | ArmSoaked | KnobPuttingBack,
) -> str:  # fmt: skip
    match event:
        case KnobSetting(service=service, knob=knob, value=value):
            return f"set {service} {knob}={value}"
        case CoRestarting(order=order):
            return f"co-restart {' → '.join(order)} (the changed services and their dependents)"
        case VerifyingLayers(layers=layers):
            return f"verify {', '.join(layers)}"
        case KnobVerifiedLive(service=service, knob=knob, value=value, verification_id=vid):
            return f"{service} {knob}={value} verified live (verification {vid})"
        case StepFailed(error=error):
            return f"failed: {error}"
        case AbJournalStarted(session_id=sid):
            return f"A/B journal {sid}: resume with `ab --resume {sid}` if interrupted"
        case AbResumed(session_id=sid, kept=kept):
            return f"resuming A/B {sid}: {kept} visit(s) kept"
        case AbVisitStarted():
            e = event
            arm = f"arm {e.knob}={e.value}"
            return f"round {e.round_index + 1}/{e.rounds} ({e.first}→{e.second}): {arm}"
        case KnobRestoring(service=service, knob=knob, value=value):
            return f"restoring {service} {knob} {'unset' if value is None else f'={value}'}"
        case CaseTestPlanned():
            return _case_test(event)
        case VisitStarted(index=index, total=total, arm=arm):
            return f"visit {index + 1}/{total}: arm {arm}"
        case ArmSoaked(arm=arm, value=value, failed=failed, sessions=sessions):
            return f"arm {arm} ({value}): {failed}/{sessions} sessions failed"
        case KnobPuttingBack(service=service, knob=knob, value=value):
            return f"putting {service} {knob} back as found ({value})"
        case _:
            assert_never(event)


def _case_test(e: CaseTestPlanned) -> str:
    order = " ".join(arm[0].upper() for arm in e.order)
    return (
        f"case test {e.target}: {e.suspect} against {e.revert}, {e.rounds} round(s) each "
        f"({order}), {e.sessions} session(s) x {e.session_rounds} rounds per visit (the "
        f"workload of soak #{e.soak_id})"
    )


def describe_level(event: BenchProgress) -> str | None:
    """A bench level's line once every request of it was measured (None: not that moment)."""
    if event.phase == "run" and event.done == event.total:
        return f"  {level_label(event.concurrency)}: {event.total} requests measured"
    return None
