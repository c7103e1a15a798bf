"""Progress in words: one line per event an operation tells (returns str, no I/O).

Each feature holds its events (``core/<feature>/events.py``, data only; their union is
:data:`servelab.core.progress.ProgressEvent`); :func:`describe_progress` words each kind, matching
on its type (mypy names a kind left out), and the CLI prints the line on stderr.
:func:`describe_level` words the one line a bench level gets when its progress is shown as lines
(an A/B's arms) rather than as a bar.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, assert_never

from servelab.core.ab.events import (
    AbJournalStarted,
    AbResumed,
    AbVisitStarted,
    KnobKept,
    KnobRestoring,
)
from servelab.core.ab.tuneevents import (
    PricedFrom,
    TuneArmKept,
    TuneEliminated,
    TuneLevelStopped,
    TuneOverBudget,
    TuneResumed,
    TuneScreened,
    TuneStarted,
    TuneVisitStarted,
)
from servelab.core.answers.events import (
    ArmAnswered,
    ArmDropped,
    ReferencesReused,
    ReferencesTaken,
)
from servelab.core.case.bisectevents import BisectPlanned, BisectResumed, ProbeDecided, ProbeStarted
from servelab.core.case.events import (
    ArmSoaked,
    CaseTestPlanned,
    KnobPuttingBack,
    StepFailed,
    VisitStarted,
)
from servelab.core.deploy.events import (
    CoRestarting,
    EnvFileRestored,
    KnobNotAsFile,
    LaunchTimedOut,
    OtherDeploymentsRecord,
    RestartingBehind,
    RestartPlanned,
    RollingPlanned,
    RollPhaseFailed,
    RollPhaseStarted,
    RouterNotAsSpec,
    RouterUntold,
    ServiceAlreadyUp,
    ServiceFailed,
    ServiceReady,
    ServiceStarted,
    ServiceStopped,
    StartCommandOutlived,
    StopFailed,
    UnitReloaded,
    UpLeftServingDown,
    UpUndone,
    WasStopping,
)
from servelab.core.knobs.events import KnobSetting, KnobVerifiedLive
from servelab.core.progress import ProgressEvent
from servelab.core.redaction import mask
from servelab.core.soak.events import (
    EnginesStarted,
    Localizing,
    RequestResent,
    SoakDeadlineReached,
    SoakStarted,
    StallSeen,
    StreamHeld,
)
from servelab.core.verify.events import (
    ProbingE2E,
    ProbingHealth,
    ProbingWorkers,
    ReadingEnvFile,
    ReadingLiveEnv,
    VerifyingLayers,
)
from servelab.report.othersrecord import others_words, stale_words, untold_words
from servelab.report.relaunch import changed_settings
from servelab.report.text import arm_value, level_label, url_text

if TYPE_CHECKING:  # the bench's modules cost every command ~0.7 s to import; only its type is used
    from servelab.core.bench.contract import BenchProgress

__all__ = ["describe_level", "describe_progress", "over_budget_phrase"]


def _cut(cut: int) -> str:
    """A case arm's probes cut by the run's end, apart from those answered ("" when none)."""
    return f", {cut} cut by the run's end (not judged)" if cut else ""


def _unset(value: str | None) -> str:
    return "unset" if value is None else value


def describe_progress(event: ProgressEvent) -> str:
    """The event as one line."""
    match event:
        case (
            ServiceStarted() | StartCommandOutlived() | LaunchTimedOut() | ServiceReady()
            | ServiceAlreadyUp() | KnobNotAsFile() | ServiceStopped() | StopFailed()
            | ServiceFailed() | UpUndone() | RestartPlanned() | EnvFileRestored() | UnitReloaded()
            | RollingPlanned() | RollPhaseStarted() | RollPhaseFailed() | OtherDeploymentsRecord()
            | RouterNotAsSpec() | RestartingBehind() | UpLeftServingDown() | WasStopping()
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
        case (
            TuneStarted() | TuneResumed() | TuneVisitStarted() | TuneEliminated()
            | TuneLevelStopped() | TuneArmKept()
        ):  # fmt: skip
            return _tune(event)
        case BisectPlanned() | BisectResumed() | ProbeStarted() | ProbeDecided():
            return _bisect(event)
        case (
            SoakStarted() | EnginesStarted() | RequestResent() | StallSeen() | Localizing()
            | StreamHeld() | SoakDeadlineReached()
        ):  # fmt: skip
            return _soak(event)
        case ReferencesTaken(n=n, concurrency=conc):
            return f"answers: {n} reference answers taken from the baseline at C{conc}"
        case ArmDropped(arm=arm, baseline=base, wrong=wrong, baseline_wrong=bw, n=n):
            return (f"arm {arm} dropped: it changes answers ({wrong} of {n} wrong against "
                    f"{bw} of {n} for {base})")  # fmt: skip
        case ArmAnswered(arm=arm, value=value, wrong=None, answers=n, cut=cut):
            return f"arm {arm} ({arm_value(value)}): {n} answers (judged at the end){_cut(cut)}"
        case ArmAnswered(arm=arm, value=value, wrong=wrong, answers=n, cut=cut):
            return f"arm {arm} ({arm_value(value)}): {wrong}/{n} answers wrong{_cut(cut)}"
        case ReferencesReused(id=rid, n=n):
            return f"answers: reusing {n} reference answers of the same state (references {rid})"
        case TuneScreened(blocks=blocks, factors=()):
            return (f"screening stopped after {blocks} block(s): no knob left to tune, the "
                    "original values are kept")  # fmt: skip
        case TuneScreened(blocks=blocks, factors=factors, fixed=fixed):
            held = f" ({', '.join(fixed)} held at their low value)" if fixed else ""
            return (f"screening stopped after {blocks} block(s): tuning {', '.join(factors)}"
                    f"{held}")  # fmt: skip
        case TuneOverBudget():
            return over_budget_phrase(event)
        case _:
            return _knob(event)


def over_budget_phrase(e: TuneOverBudget) -> str:
    """The tune's first block against ``--max-minutes``, with the estimate and its price."""
    priced = ("the latest recorded tune's mean visit" if e.priced_from == PricedFrom.RECORDED
              else "this tune's first visit")  # fmt: skip
    return (f"warning: --max-minutes {e.max_minutes:g} is shorter than the first block: "
            f"{e.visits} visit(s) at {e.visit_s:,.1f} s each ({priced}) take about "
            f"{e.first_block_min:,.1f} min, and the block runs whole (the budget is checked "
            f"between blocks); every block would take about {e.full_min:,.1f} min")  # fmt: skip


def _deploy(
    event: ServiceStarted | StartCommandOutlived | LaunchTimedOut | ServiceReady
    | ServiceAlreadyUp | KnobNotAsFile | ServiceStopped | StopFailed | ServiceFailed | UpUndone
    | RestartPlanned | EnvFileRestored | UnitReloaded | RollingPlanned | RollPhaseStarted
    | RollPhaseFailed | OtherDeploymentsRecord | RouterNotAsSpec | RestartingBehind
    | UpLeftServingDown | WasStopping,
) -> str:  # fmt: skip
    match event:
        case ServiceStarted(service=service, pid=pid, host=host, log=log):
            return f"{service}: started pid {pid} on {host} (log {log})"
        case StartCommandOutlived(service=service, timeout_s=timeout_s):
            still = f"start command still running after {timeout_s}s"
            return f"{service}: {still}, but the service is ready"
        case LaunchTimedOut(service=service, host=host, url=url):
            return (f"{service}: its launch command timed out on {host}; probing readiness at "
                    f"{url_text(url)}")  # fmt: skip
        case ServiceReady(service=service, outcome=outcome, elapsed_s=elapsed_s):
            return f"{service}: {outcome} in {elapsed_s:.1f}s"
        case ServiceAlreadyUp(service=service, pid=pid, recorded_again=True):
            return (
                f"{service}: already up (pid {pid}, started by servelab; its lost pid record "
                "written again)"
            )
        case ServiceAlreadyUp(service=service, pid=pid, by_servelab=True):
            return f"{service}: already up (pid {pid})"
        case ServiceAlreadyUp(service=service, pid=pid, untold=RouterUntold(missing=missing)):
            return f"{service}: {untold_words(pid, missing)}"
        case ServiceAlreadyUp(service=service, pid=pid):
            return f"{service}: already up (pid {pid}, not started by servelab)"
        case WasStopping(service=service, pid=pid):
            return f"{service}: pid {pid} was stopping (it exited while up waited); starting it"
        case KnobNotAsFile(service=service, knob=knob, live=live, file=file, fix=fix):
            runs, says = (_unset(mask(knob, v)) for v in (live, file))
            return (f"warning: {service} runs {knob}={runs}, its file says {says}; apply the "
                    f"file with: {shlex.join(fix)}")  # fmt: skip
        case RouterNotAsSpec(service=service, changes=changes, fix=fix):
            return (f"warning: {service} was launched with other router settings than the "
                    f"spec's ({changed_settings(changes)}); apply the spec's with: "
                    f"{shlex.join(fix)}")  # fmt: skip
        case ServiceStopped(service=service, outcome=outcome, stale_record=stale):
            return f"{service}: {outcome}" + ("" if stale is None else f"; {stale_words(stale)}")
        case OtherDeploymentsRecord(service=service, deployment=other, pid=pid, state_dir=where):
            return f"{service}: {others_words(other, pid, where)}"
        case StopFailed(service=service, error=error):
            return f"{service}: could not stop: {error}"
        case ServiceFailed(service=service, error=error):
            return f"{service}: failed: {error}"
        case UpUndone(interrupted=interrupted, stopping=stopping):
            what = "up interrupted" if interrupted else "up failed"
            return f"{what}; stopping what this run started: {', '.join(stopping) or 'nothing'}"
        case UpLeftServingDown(services=services, recovery=recovery):
            one = len(services) == 1
            was, now, it = ("was", "is", "it") if one else ("were", "are", "them")
            return (f"{', '.join(services)} {was} serving before this run and {now} now down; "
                    f"bring {it} back with: {shlex.join(recovery)}")  # fmt: skip
        case RestartingBehind(service=service, behind=behind):
            verb = "was" if len(behind) == 1 else "were"
            return f"{service}: restarting ({', '.join(behind)} {verb} started behind it)"
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
    | AbJournalStarted | AbResumed | AbVisitStarted | KnobRestoring | KnobKept | CaseTestPlanned
    | VisitStarted | ArmSoaked | KnobPuttingBack,
) -> str:  # fmt: skip
    match event:
        case KnobSetting(service=service, knob=knob, value=value):
            return f"unset {service} {knob}" if value is None else f"set {service} {knob}={value}"
        case CoRestarting(order=order):
            return f"co-restart {' → '.join(order)} (the changed services and their dependents)"
        case VerifyingLayers(layers=layers):
            return f"verify {', '.join(layers)}"
        case KnobVerifiedLive(service=service, knob=knob, value=value, verification_id=vid):
            said = f"{service} {_setting(knob, value)}, verified live (verification {vid})"
            if event.pair_failed:
                said = (f"{service} {_setting(knob, value)}, live but not verified: its pair layer "
                        f"failed ({'; '.join(event.pair_failed)}; verification {vid}): "
                        "measured, never kept")  # fmt: skip
            if event.long_failed:
                said += "; its long prompt failed (e2e.long_failed), its short prompts passed"
            return said
        case StepFailed(error=error):
            return f"failed: {error}"
        case AbJournalStarted(session_id=sid, spec_args=spec_args):
            resume = shlex.join(["servelab", "ab", "--resume", str(sid), *spec_args])
            return f"A/B journal {sid}: resume with `{resume}` if interrupted"
        case AbResumed(session_id=sid, kept=kept):
            return f"resuming A/B {sid}: {kept} visit(s) kept"
        case AbVisitStarted():
            e = event
            arm = f"arm {e.knob}={e.value}"
            return f"round {e.round_index + 1}/{e.rounds} ({e.first}→{e.second}): {arm}"
        case KnobRestoring(service=service, knob=knob, value=value):
            return f"restoring {service} {_setting(knob, value)}"
        case KnobKept(service=service, knob=knob, value=value, rule=rule):
            why = "" if rule == value else f" (the {rule} arm)"
            return f"keeping {service} {knob}={value}{why} (--keep)"
        case CaseTestPlanned():
            return _case_test(event)
        case VisitStarted(index=index, total=total, arm=arm):
            return f"visit {index + 1}/{total}: arm {arm}"
        case ArmSoaked(arm=arm, value=value, failed=failed, sessions=sessions):
            return f"arm {arm} ({value}): {failed}/{sessions} sessions failed"
        case KnobPuttingBack(service=service, knob=knob, value=value):
            return f"putting {service} {knob} back as found ({'unset' if value is None else value})"
        case _:
            assert_never(event)


def _setting(knob: str, value: str | None) -> str:
    """``KNOB=VALUE``, or ``KNOB unset`` (None: the knob is not set)."""
    return f"{knob} unset" if value is None else f"{knob}={value}"


def _case_test(e: CaseTestPlanned) -> str:
    order = " ".join(arm[0].upper() for arm in e.order)
    if e.soak_id is None:
        return (f"case test {e.target}: {arm_value(e.suspect)} against {arm_value(e.revert)}, "
                f"{e.rounds} round(s) "
                f"each ({order}), {e.session_rounds} bench run(s) with answer probes per "
                "visit")  # fmt: skip
    return (
        f"case test {e.target}: {arm_value(e.suspect)} against {arm_value(e.revert)}, "
        f"{e.rounds} round(s) each "
        f"({order}), {e.sessions} session(s) x {e.session_rounds} rounds per visit (the "
        f"workload of soak #{e.soak_id})"
    )


def _tune(
    event: TuneStarted | TuneResumed | TuneVisitStarted | TuneEliminated | TuneLevelStopped
    | TuneArmKept,
) -> str:  # fmt: skip
    match event:
        case TuneStarted(tune_id=tid, arms=arms, levels=levels, max_rounds=most):
            at = ", ".join(f"C{c}" for c in levels)
            head = f"tune of {arms} arms at {at}, at most {most} blocks"
            return (
                head if tid is None else f"{head}: resume with `tune --resume {tid}` if interrupted"
            )
        case TuneResumed(tune_id=tid, kept=kept):
            return f"resuming tune {tid}: {kept} visit(s) kept"
        case TuneVisitStarted():
            e = event
            at = ", ".join(f"C{c}" for c in e.levels)
            return (
                f"block {e.block}/{e.max_rounds}, visit {e.index + 1}/{e.size}: arm {e.arm} ({at})"
            )
        case TuneEliminated(level=level, arm=arm, block=block, lost_to=lost_to):
            return f"C{level}: arm {arm} dropped after block {block}: shown worse than {lost_to}"
        case TuneLevelStopped(level=level, outcome=outcome, winner=winner):
            won = f"winner {winner}" if winner is not None else "no winner"
            return f"C{level}: stopped ({outcome}), {won}"
        case TuneArmKept(arm=None, pair_failed=str(failed)):
            return (f"the best arm, {failed}, failed the pair layer when made live (its engines "
                    f"disagree on the KV hand-off): putting the original values back")  # fmt: skip
        case TuneArmKept(arm=None, unshown=str(unshown)):
            return (f"the best arm, {unshown}, is best on speed alone (its answers not shown "
                    f"unchanged: too few probe pairs, or probes cut by the run's end): putting the "
                    f"original values back")  # fmt: skip
        case TuneArmKept(arm=None):
            return "no arm is best at every level: putting the original values back"
        case TuneArmKept(arm=arm):
            return f"keeping the best arm, {arm}"
        case _:
            assert_never(event)


def _bisect(event: BisectPlanned | BisectResumed | ProbeStarted | ProbeDecided) -> str:
    match event:
        case BisectPlanned(case_id=cid, changes=n, test=test, rounds=rounds):
            return (f"case bisect {cid}: {n} change(s) between good and bad, test {test}, at "
                    f"most {rounds} round(s) per probe")  # fmt: skip
        case BisectResumed(case_id=cid, probes=probes):
            return f"resuming the bisection of case {cid}: {probes} probe(s) kept"
        case ProbeStarted(number=number, changes=changes):
            applied = f"with {', '.join(changes)}" if changes else "(no change applied)"
            return f"probe {number}: the good state {applied} against the bad state"
        case ProbeDecided():
            e = event
            return (f"probe {e.number}: {e.outcome.upper()} after {e.rounds} round(s): "
                    f"{e.failed}/{e.units} failed with the probe, {e.bad_failed}/{e.bad_units} "
                    f"in the bad state, p = {e.p_value:.3g}")  # fmt: skip
        case _:
            assert_never(event)


def _soak(
    event: SoakStarted | EnginesStarted | RequestResent | StallSeen | Localizing | StreamHeld
    | SoakDeadlineReached,
) -> str:  # fmt: skip
    match event:
        case SoakStarted(sessions=sessions, rounds=rounds, entry=entry, connection=connection):
            shape = f"{sessions} sessions x {rounds} rounds"
            return f"soak: {shape} via {url_text(entry)} ({connection} connections)"
        case EnginesStarted(start=start):
            return f"engines were {start.start} ({start.reason})"
        case RequestResent(session=session, round=rnd):
            return f"resend: session {session} round {rnd} sent again"
        case StallSeen():
            e = event
            return (f"stall: session {e.session} round {e.round} after {e.carried} requests on "
                    f"its connection ({e.payload_bytes} B payload, phase {e.phase})")  # fmt: skip
        case Localizing(signature=signature):
            return f"localizing {signature}: replaying the payload through every hop"
        case StreamHeld(session=session, round=rnd):
            return f"held stream: session {session} round {rnd}'s payload, through the entry"
        case SoakDeadlineReached():
            return "deadline reached: the sessions stop here (partial results kept)"
        case _:
            assert_never(event)


def describe_level(event: BenchProgress) -> str | None:
    """A bench level's line once every request of it was measured (None: not that moment)."""
    if event.phase == "run" and event.done == event.total:
        return f"  {level_label(event.concurrency)}: {event.total} requests measured"
    return None
