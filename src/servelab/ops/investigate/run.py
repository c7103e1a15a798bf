"""``servelab investigate``: the evidence loop in one command (reproduce → localize → suspects →
decide → resolve), each step an existing command's ops function.

The planner (:func:`servelab.core.investigate.plan.next_action`) names the next action from the
state; this module does it (:mod:`servelab.ops.investigate.steps`) and records the whole state on
the case as the event ``investigate`` after every action, so Ctrl-C keeps what was decided and
``resume`` goes on from the newest one. ``max_minutes`` is checked before each action but the
first of a run (so every run makes progress): spent, the loop stops with its state kept and the
next action named. Each experiment that co-restarts (a knob's ``case test``, a slowdown's A/B,
the good state, a bisection: one question each, naming what restarts), reverting a convicted knob
and carrying out the restore plan ask ``confirm`` first unless ``yes``; an experiment declined
stops the loop with its state kept and the action named (``declined``), as the budget does.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from servelab.core.ab.record import AbRunRecord
from servelab.core.case.bisect import Change
from servelab.core.case.contract import RestoreOutcome, RevertOutcome
from servelab.core.case.model import RestoreItem
from servelab.core.case.record import CaseEvent
from servelab.core.case.revert import revert_cost
from servelab.core.deploy.spec import DeploymentSpec
from servelab.core.deploy.topology import FileIdentities, restart_plan
from servelab.core.investigate.events import (
    BudgetSpent,
    ExperimentRestarts,
    ExperimentStarted,
    InvestigateEvent,
    Localized,
    Reproduced,
    SlowMeasured,
    StageStarted,
    SuspectsListed,
    Verdict,
)
from servelab.core.investigate.plan import (
    Action,
    Bisect,
    ComponentTest,
    Finish,
    GoodState,
    KnobTest,
    ListSuspects,
    Localize,
    Reproduce,
    Resolve,
    SlowTest,
    after_decide,
    next_action,
    record_decided,
    side_of,
    suspects_since,
)
from servelab.core.investigate.state import (
    Decided,
    Ending,
    InvestigationState,
    Side,
    Stage,
    SuspectChange,
    Symptom,
)
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.ledger.codec import encode
from servelab.errors import CaseError
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.ops.case import case as cases
from servelab.ops.context import Operation, Progress, SpecOrOperation, operation
from servelab.ops.fileids import file_identities
from servelab.ops.investigate.begin import begin
from servelab.ops.investigate.slow import (
    baseline_bench,
    check_baseline,
    reproduce_slow,
    slow_test,
)
from servelab.ops.investigate.steps import (
    StepConfig,
    bisect_changes,
    component_of,
    good_state,
    reproduce_answers,
    reproduce_hang,
    test_target,
)
from servelab.ops.verify.e2e import bounded_by
from servelab.ops.verify.verify import verify

__all__ = [
    "GOOD_FAILS",
    "InvestigateConfig",
    "InvestigateOutcome",
    "experiment_restarts",
    "investigate",
]

Tell = Callable[[InvestigateEvent], None]
#: The good state "fails too" when at least this share of its sessions failed.
GOOD_FAILS = 0.5
#: Asked before a co-restart: the convicted knobs to revert (``"revert"``), the restore plan's
#: items (``"restore"``), or an experiment's restarts (``"experiment"``); False: not done (the
#: state says so; an experiment declined stops the loop).
Confirm = Callable[
    [str, Sequence[RestoreItem] | Sequence[str] | Sequence[ExperimentRestarts]], bool
]
#: The case's root cause in words, from the state (the report's: ops never words).
Phrase = Callable[[InvestigationState], str]


@dataclass(frozen=True)
class InvestigateConfig:
    """An investigation of ``symptom``: under case ``case_id`` (None: a new case titled
    ``title``), since ``since`` (``verify:ID``; None: the newest passing verification before the
    case was opened), at most ``max_minutes``, ``resume`` the case's stored investigation."""

    symptom: Symptom
    steps: StepConfig
    case_id: int | None = None
    title: str = ""
    since: str | None = None
    yes: bool = False
    max_minutes: float | None = None
    resume: bool = False

    def __post_init__(self) -> None:
        if self.resume and self.case_id is None:
            raise CaseError("--resume needs --case ID (the case whose investigation goes on)")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise CaseError("--max-minutes must be > 0")


@dataclass
class InvestigateOutcome:
    """The state as recorded, whether the budget stopped it (and the action it would do next),
    and what the resolve stage changed; ``declined``: stopped because an experiment's restarts
    were declined."""

    state: InvestigationState
    stopped: bool = False
    declined: bool = False
    next: Action | None = None
    event_id: int | None = None
    reverts: list[RevertOutcome] = field(default_factory=list)
    restore: RestoreOutcome | None = None


def _save(ledger: Ledger, state: InvestigationState) -> int:
    return ledger.add(
        CaseEvent(at=NOW, case_id=state.case_id, kind=InvestigationState.KIND, detail=encode(state))
    )


@dataclass
class _Run:
    op: Operation
    ledger: Ledger
    cfg: InvestigateConfig
    tell: Tell
    confirm: Confirm
    phrase: Phrase
    outcome: InvestigateOutcome


async def investigate(
    where: SpecOrOperation,
    ledger: Ledger,
    cfg: InvestigateConfig,
    *,
    tell: Tell,
    confirm: Confirm,
    phrase: Phrase,
    progress: Progress | None = None,
) -> InvestigateOutcome:
    """Run the loop until it ends or the budget is spent (see the module docstring)."""
    started = begun = time.monotonic()
    async with operation(where, ledger=ledger, progress=progress) as op:
        if cfg.symptom is Symptom.SLOW and not cfg.resume:
            check_baseline(op, ledger)  # its rows read and its trace is here: before any case
        state = begin(ledger, cfg, tell)
        outcome = InvestigateOutcome(state, event_id=None if cfg.resume else _save(ledger, state))
        run = _Run(op, ledger, cfg, tell, confirm, phrase, outcome)
        while not isinstance(action := next_action(state), Finish):
            spent = (time.monotonic() - begun) / 60
            if cfg.max_minutes is not None and started > begun and spent >= cfg.max_minutes:
                tell(BudgetSpent(round(spent, 2), state.stage, state.ending))
                outcome.stopped, outcome.next = True, action
                break
            if not await _agreed(run, action):
                outcome.stopped, outcome.declined, outcome.next = True, True, action
                break
            tell(StageStarted(state.stage, state.case_id))
            state = await _do(run, state, action)
            state = dataclasses.replace(state, elapsed_s=round(
                state.elapsed_s + time.monotonic() - started, 3))  # fmt: skip
            started = time.monotonic()
            outcome.state, outcome.event_id = state, _save(ledger, state)
        if cfg.case_id is None and state.ending in _NOTHING_TO_CHASE:
            _close_unreproduced(run, state)
    return outcome


#: Endings with nothing to chase: the case this run opened is resolved with them.
_NOTHING_TO_CHASE = frozenset({Ending.NOT_REPRODUCED, Ending.NO_BASELINE, Ending.INCONCLUSIVE})


def _close_unreproduced(run: _Run, state: InvestigationState) -> None:
    """The case this run opened, its symptom not reproduced (or no baseline to compare with),
    resolved with that as its root cause and no verdict: no open case is left behind. A case
    given by ``--case`` stays open (the operator's: another symptom may reproduce)."""
    cases.resolve_case(run.ledger, state.case_id, run.phrase(state))


def experiment_restarts(
    spec: DeploymentSpec, action: Action, same: FileIdentities | None = None
) -> ExperimentRestarts | None:
    """What ``action`` co-restarts in ``spec`` (None: nothing, or not an experiment): what
    ``restart`` restarts, its files compared by their identities ``same``
    (:func:`~servelab.ops.fileids.file_identities`: links to one file are one file)."""
    match action:
        case KnobTest(suspect=s) | SlowTest(suspect=s):
            how, suspects = ("case test" if isinstance(action, KnobTest) else "ab"), (s,)
        case GoodState(suspects=suspects):
            how = "good state"
        case Bisect(suspects=suspects):
            how = "bisect"
        case _:
            return None
    order = restart_plan(spec, {s.service for s in suspects}, same)
    return ExperimentRestarts(how, tuple(s.target for s in suspects), tuple(order))


async def _agreed(run: _Run, action: Action) -> bool:
    """An experiment that co-restarts runs once agreed (always, with ``yes``)."""
    if run.cfg.yes:
        return True
    restarts = experiment_restarts(run.op.spec, action, await file_identities(run.op))
    return restarts is None or run.confirm("experiment", [restarts])


async def _do(run: _Run, state: InvestigationState, action: Action) -> InvestigationState:
    match action:
        case Reproduce():
            return await _reproduce(run, state)
        case Localize():
            return await _localize(run, state)
        case ListSuspects():
            return _suspects(run, state)
        case ComponentTest(target=target):
            run.tell(ExperimentStarted("case test", (target,)))
            return _decided(run, state, [await test_target(
                run.op, run.ledger, state.case_id, target, run.cfg.steps.component_rounds,
                state.symptom, run.cfg.steps)])  # fmt: skip
        case KnobTest(suspect=suspect):
            run.tell(ExperimentStarted("case test", (suspect.target,)))
            return _decided(run, state, [await test_target(
                run.op, run.ledger, state.case_id, suspect.target, run.cfg.steps.knob_rounds,
                state.symptom, run.cfg.steps)])  # fmt: skip
        case SlowTest(suspect=suspect):
            return await _slow_test(run, state, suspect)
        case GoodState(suspects=suspects):
            return await _good_state(run, state, suspects)
        case Bisect(suspects=suspects):
            run.tell(ExperimentStarted("bisect", tuple(s.target for s in suspects)))
            changes = tuple(Change(s.service, s.knob, s.good, s.suspected) for s in suspects)
            bisect_id, decided = await bisect_changes(
                run.op, run.ledger, state.case_id, changes, state.symptom, run.cfg.steps
            )
            return _decided(run, dataclasses.replace(state, bisect_id=bisect_id), decided)
        case Resolve():
            return await _resolve(run, state)
        case Finish():
            return state


async def _good_state(
    run: _Run, state: InvestigationState, suspects: tuple[SuspectChange, ...]
) -> InvestigationState:
    """The good state soaked: failing in at least half its sessions (:data:`GOOD_FAILS`), no
    change is bisected and each stays inconclusive (by ``good state``, the soak its evidence)."""
    run.tell(ExperimentStarted("good state", tuple(s.target for s in suspects)))
    changes = tuple(Change(s.service, s.knob, s.good, s.suspected) for s in suspects)
    got = await good_state(run.op, run.ledger, state.case_id, changes)
    fails = got.units > 0 and got.failed >= GOOD_FAILS * got.units
    state = dataclasses.replace(state, good_soak_id=got.soak_id, good_fails=fails)
    if not fails:
        return state
    decided = [Decided(s.target, "inconclusive", "good state", got.soak_id) for s in suspects]
    return _decided(run, state, decided)


async def _slow_test(
    run: _Run, state: InvestigationState, suspect: SuspectChange
) -> InvestigationState:
    """The change's A/B on the baseline's workload (restoring: what the slowdown cost); what the
    change bought is then that A/B's."""
    assert state.slowdown is not None
    run.tell(ExperimentStarted("ab", (suspect.target,)))
    bench = baseline_bench(run.ledger, state.slowdown)
    decided = await slow_test(run.op, run.ledger, state.case_id, suspect, bench,
                              run.cfg.steps.slow_rounds, 1.0 / state.slowdown.lost)  # fmt: skip
    cost = revert_cost(run.ledger.list(AbRunRecord), suspect.service, suspect.knob,
                       suspect.suspected, suspect.good)  # fmt: skip
    measured = dataclasses.replace(suspect, ab_id=cost.ab_id, bought=cost.points)
    suspects = tuple(measured if s == suspect else s for s in state.suspects)
    return _decided(run, dataclasses.replace(state, suspects=suspects), [decided])


def _decided(run: _Run, state: InvestigationState, decided: list[Decided]) -> InvestigationState:
    for d in decided:
        run.tell(Verdict(d.target, d.outcome, d.p_value))
    state = record_decided(state, decided)
    return state if not isinstance(next_action(state), Resolve) else after_decide(state)


async def _reproduce_slow(run: _Run, state: InvestigationState) -> InvestigationState:
    got = await reproduce_slow(run.op, run.ledger, state.case_id)
    run.tell(SlowMeasured(got.slowdown, got.skipped))
    if got.slowdown is None:
        return dataclasses.replace(state, stage=Stage.DONE, ending=Ending.NO_BASELINE,
                                   small_baselines=got.skipped or None)  # fmt: skip
    slower, s = got.slowdown.slower, got.slowdown
    state = dataclasses.replace(state, reproduced=slower, run_ids=got.run_ids, slowdown=s)
    if run.cfg.since is None:  # the good point is the baseline: the changes since it are suspects
        state = dataclasses.replace(state, since=s.point, since_at=s.baseline_at)
    if s.inconclusive:  # neither slower nor shown not slower: never "did not reproduce"
        return dataclasses.replace(state, stage=Stage.DONE, ending=Ending.INCONCLUSIVE)
    if not slower:
        return dataclasses.replace(state, stage=Stage.DONE, ending=Ending.NOT_REPRODUCED)
    return dataclasses.replace(state, stage=Stage.LOCALIZE)


async def _reproduce(run: _Run, state: InvestigationState) -> InvestigationState:
    steps = run.cfg.steps
    if state.symptom is Symptom.SLOW:
        return await _reproduce_slow(run, state)
    if state.symptom is Symptom.ANSWERS:
        got = await reproduce_answers(run.op, steps)
    else:
        got = await reproduce_hang(run.op, run.ledger, state.case_id, steps)
    run.tell(Reproduced(got.failed > 0, got.soak_id, got.failed, got.units))
    state = dataclasses.replace(
        state,
        reproduced=got.failed > 0,
        soak_id=got.soak_id,
        run_ids=got.run_ids,
        layer=got.layer,
        worker=got.worker,
    )
    if got.failed == 0:
        return dataclasses.replace(state, stage=Stage.DONE, ending=Ending.NOT_REPRODUCED)
    return dataclasses.replace(state, stage=Stage.LOCALIZE)


async def _localize(run: _Run, state: InvestigationState) -> InvestigationState:
    # no restart since the reproducing soak: the engines are warm, the probe is bounded too
    e2e = bounded_by(run.cfg.steps.soak.deadlines, warm=True)
    report = await verify(run.op, ledger=run.ledger, e2e=e2e)
    component = component_of(run.op)
    side = side_of(state.layer, component=component)
    run.tell(Localized(state.layer, state.worker, side, report.verification_id))
    return dataclasses.replace(
        state, stage=Stage.SUSPECTS, side=side, verification_id=report.verification_id,
        component=component if side is Side.OUTSIDE else None,
    )  # fmt: skip


def _suspects(run: _Run, state: InvestigationState) -> InvestigationState:
    ledger = run.ledger
    found = suspects_since(ledger.list(KnobChangeRecord), since_at=state.since_at,
                           upto_id=state.upto_change_id,
                           ab_runs=ledger.list(AbRunRecord))  # fmt: skip
    run.tell(SuspectsListed(state.since, found))
    named = {s.target for s in cases.load_case(ledger, state.case_id).suspects}
    targets = [s.target for s in found]
    if state.component is not None:
        targets.insert(0, f"component:{state.component}")
    for target in targets:
        if target not in named:
            why = f"changed since {state.since}" if target.startswith("knob:") else (
                f"localized: {state.layer}")  # fmt: skip
            cases.add_suspect(ledger, state.case_id, target, why, spec=run.op.spec)
    state = dataclasses.replace(state, stage=Stage.DECIDE, suspects=found)
    return state if not isinstance(next_action(state), Resolve) else after_decide(state)


async def _revert_convicted(run: _Run, state: InvestigationState) -> InvestigationState:
    """Each convicted knob still at its suspected value reverted under the case (asked first)."""
    live = [s for s in state.suspects if s.target in state.convicted and s.target not in
            state.reverted and await cases.current_value(run.op, s.target) != s.good]  # fmt: skip
    if not live or not (run.cfg.yes or run.confirm("revert", [s.target for s in live])):
        return state
    done: list[str] = []
    for s in live:
        current = await cases.current_value(run.op, s.target)
        preview = cases.revert_preview(run.ledger, state.case_id, s.target, current=current,
                                       to=s.good, deployment=run.op.loaded)  # fmt: skip
        reverted = await cases.revert(run.op, run.ledger, preview)
        run.outcome.reverts.append(reverted)
        if reverted.ok:
            done.append(s.target)
    return dataclasses.replace(state, reverted=(*state.reverted, *done))


async def _resolve(run: _Run, state: InvestigationState) -> InvestigationState:
    state = await _revert_convicted(run, state)
    view = cases.resolve_case(run.ledger, state.case_id, run.phrase(state),
                              exonerate=state.exonerated, convict=state.convicted)  # fmt: skip
    restored, verification = None, None
    if view.plan and not cases.already_restored(view):
        if run.cfg.yes or run.confirm("restore", view.plan):
            done = await cases.restore(run.op, run.ledger, state.case_id)
            run.outcome.restore = done
            restored = done.ok
            verification = done.verification.verification_id if done.verification else None
        else:
            restored = False
    return dataclasses.replace(state, stage=Stage.DONE, restored=restored,
                               restore_verification_id=verification)  # fmt: skip
