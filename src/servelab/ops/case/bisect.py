"""``case bisect``: which of the changes between a good state and a bad one make it bad.

The changes come from two points of the ledger (:func:`servelab.ops.case.changes.find_changes`:
``now``, a time, ``verify:ID``, ``backup:PATH``), every declared knob whose value differs between
them, or are listed. The search is ddmin (:mod:`servelab.core.case.bisect`) after a first probe
of the good state (no change applied) that must come out good for anything to be guilty. A probe
is a controlled experiment (:mod:`servelab.core.case.probe`): the probe's arm (the good state with
some of the changes) against the bad state's, visit by visit, each visit's knobs set, co-restarted
and proven live (:func:`servelab.ops.arm.make_live`, as ``ab`` and ``tune`` make their arms), then
tested: the case's failing soak replayed (``soak``, as ``case test`` replays it:
:func:`servelab.ops.case.experiment.failing_workload`), or bench runs through the router against a
threshold. The knob changes a visit makes are recorded, not under the case (the case's restore plan
is made of its reverts alone).

Everything is recorded on the case as it happens: the bisection's start (event ``bisect``), each
probe as it ends (event ``probe``, and evidence ``probe``), the guilty changes and the verdicts
they support at the end (event ``bisected``, evidence ``bisect``; ``case resolve`` takes them). An
interrupted bisection (Ctrl-C, a lost link) keeps its probes; :func:`resume_bisect` replays them
and goes on. The knobs are left as they were found, also when interrupted.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

from servelab.core.bench.contract import BenchConfig
from servelab.core.case.bisect import (
    Bisected,
    BisectState,
    Change,
    NextProbe,
    ProbeOutcome,
    next_step,
    record_probe,
    start_bisect,
)
from servelab.core.case.bisectevents import BisectPlanned, BisectResumed, ProbeDecided, ProbeStarted
from servelab.core.case.events import ArmSoaked, VisitStarted
from servelab.core.case.experiment import ALPHA, EFFECT, ArmTally
from servelab.core.case.load import case_reference, guard_probe
from servelab.core.case.model import Case
from servelab.core.case.probe import (
    ARM_BAD,
    ARM_PROBE,
    BisectConclusion,
    BisectRecord,
    ProbeRecord,
    ProbeTest,
    ProbeTestKind,
    ProbeVisit,
    bisect_verdicts,
    change_target,
    judge_probe,
    round_order,
)
from servelab.core.case.reached import LoadReference
from servelab.core.case.record import CaseEvent, CaseEvidence
from servelab.core.deploy.putback import KnobBack
from servelab.core.ledger.codec import decode, encode
from servelab.core.redaction import REDACTED, mask
from servelab.core.soak.result import SoakConfig
from servelab.errors import CaseError
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.ops.answers.session import AnswerSession, baseline_state
from servelab.ops.arm import Setting, make_live, measure
from servelab.ops.armfailure import as_found_on_failure
from servelab.ops.case.answers import answers_bench, probe_answers, wrong_answers
from servelab.ops.case.case import load_case
from servelab.ops.case.changes import check_changes, find_changes
from servelab.ops.case.experiment import failed_sessions, failing_workload, soak_targets
from servelab.ops.case.whose import bisect_owner, refuse_anothers_bisect
from servelab.ops.context import Operation, Progress, SpecOrOperation, operation
from servelab.ops.deploy.putback import as_found
from servelab.ops.knob import get_knob, live_knobs
from servelab.ops.soak.soak import soak

__all__ = [
    "BisectConfig",
    "BisectOutcome",
    "change_label",
    "resume_bisect",
    "run_bisect",
    "unfinished",
]


@dataclass(frozen=True)
class BisectConfig:
    """A bisection of case ``case_id``: the changes from ``good`` to ``bad`` (points), or
    ``changes`` as listed; the ``test``; at most ``rounds`` rounds per probe at ``alpha`` and
    ``effect``; a soak's ``sessions`` per visit (None: the failing soak's), a threshold test's
    ``runs`` per visit of ``bench`` (its URL the router's, its concurrency the test's)."""

    case_id: int
    test: ProbeTest
    good: str | None = None
    bad: str = "now"
    changes: tuple[Change, ...] = ()
    rounds: int = 3
    alpha: float = ALPHA
    effect: float = EFFECT
    sessions: int | None = None
    bench: BenchConfig | None = None
    runs: int = 3

    def __post_init__(self) -> None:
        if self.rounds < 1 or self.runs < 1:
            raise CaseError("--rounds and --runs must be ≥ 1")
        if not 0 < self.alpha < 1 or not 0 < self.effect <= 1:
            raise CaseError("--alpha must be in (0, 1) and --effect in (0, 1]")
        if not self.changes and self.good is None:
            raise CaseError("say where the good state is (--good POINT) or list the changes")
        if self.test.kind is not ProbeTestKind.SOAK and self.bench is None:
            raise CaseError("a threshold test needs a bench to run")


@dataclass(frozen=True)
class BisectOutcome:
    """The bisection as recorded: its start (event ``bisect_id``), every probe, the conclusion
    (its event and evidence), and the knobs' values left (as found)."""

    bisect_id: int
    start: BisectRecord
    probes: tuple[ProbeRecord, ...]
    conclusion: BisectConclusion
    conclusion_id: int
    evidence_id: int
    left: tuple[str | None, ...]


# -- a probe ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Run:
    """What every probe of one bisection shares."""

    bisect_id: int
    start: BisectRecord
    workload: SoakConfig | None
    bench: BenchConfig | None
    #: an answers test's references and probes (None: another test)
    answers: AnswerSession | None = None
    #: an answers test's load to reach when a probe's bad arm has not failed yet (None: another
    #: test; :func:`servelab.core.case.load.guard_probe`)
    reference: LoadReference | None = None
    #: the changes with their real values, as the visits set them (the start's are the same in
    #: memory; decoded from the ledger, a secret-looking knob's are masked)
    changes: tuple[Change, ...] = ()


def _settings(changes: Sequence[Change], applied: Sequence[int] | None) -> list[Setting]:
    """Every change's knob at its bad value when applied (all when ``applied`` is None), else
    at its good value."""
    return [Setting(c.service, c.knob, c.bad if applied is None or i in applied else c.good)
            for i, c in enumerate(changes)]  # fmt: skip


async def _answers_test(
    op: Operation, run: _Run, session: AnswerSession, arm: str, label: str, rnd: int
) -> ProbeVisit:
    """Bench runs at the test's concurrency carrying the answer probes; each wrong answer (against
    the good state's references) a failed unit."""
    assert run.bench is not None
    await session.ensure(op)
    bench = answers_bench(run.bench, run.start.test.concurrency)
    answers, ids, got = await probe_answers(op, bench, run.start.runs, rnd, f"bisect {label}")
    units, failed = wrong_answers(session, answers)
    return ProbeVisit(arm=arm, units=units, failed=failed, bench_run_ids=tuple(ids), reached=got)


async def _references(op: Operation, run: _Run) -> None:
    """An answers test's references, from the good state made live (every change at its good
    value), unless the ledger holds them for that state."""
    session = run.answers
    if session is None or await session.stored(op) is not None:
        return
    good = _settings(run.changes, ())
    await make_live(op, good, f"case {run.start.case_id}: bisect, the good state's answers",
                    e2e=False)  # fmt: skip
    await session.ensure(op)


async def _test(op: Operation, run: _Run, arm: str, label: str, rnd: int = 0) -> ProbeVisit:
    """The test on the arm made live: a soak replay, or bench runs against the threshold."""
    test = run.start.test
    if test.kind is ProbeTestKind.SOAK and run.workload is not None:
        workload = dataclasses.replace(run.workload, knobs=await live_knobs(op))
        result = await soak(workload, soak_targets(op), ledger=op.ledger)
        failed, units = failed_sessions(result), result.sessions.count
        op.say(ArmSoaked(arm, label, failed, units))
        return ProbeVisit(arm=arm, units=units, failed=failed, soak_id=result.soak_id)
    if run.bench is None:
        raise CaseError("a threshold test needs a bench to run")
    if test.kind is ProbeTestKind.ANSWERS and run.answers is not None:
        return await _answers_test(op, run, run.answers, arm, label, rnd)
    measured: list[float] = []
    ids: list[int] = []
    wrong = []  # each run's wrong answers (a threshold test checks answers unless --answers off)
    for k in range(run.start.runs):
        got = await measure(op, run.bench, [test.concurrency], f"bisect {label}", None,
                            round_=rnd * run.start.runs + k)  # fmt: skip
        measured.append(got.throughput.get(test.concurrency, 0.0))
        ids += got.bench_run_ids
        wrong.append(wrong_answers(run.answers, got.answers)[1] if run.answers else 0)
    failed = sum(test.fails(v) or w > 0 for v, w in zip(measured, wrong, strict=True))
    return ProbeVisit(arm=arm, units=len(measured), failed=failed, bench_run_ids=tuple(ids),
                      measured=tuple(measured), wrong_answers=sum(wrong))  # fmt: skip


async def _visit(
    op: Operation, run: _Run, step: NextProbe, number: int, arm: str, rnd: int
) -> ProbeVisit:
    started = time.monotonic()
    changes = run.changes
    applied = None if arm == ARM_BAD else step.indices
    why = f"case {run.start.case_id}: bisect probe {number}, arm {arm}, round {rnd + 1}"
    live = await make_live(op, _settings(changes, applied), why, e2e=False)
    label = "every change" if applied is None else _labels(run.start.changes, applied)
    visit = await _test(op, run, arm, label, rnd)
    return dataclasses.replace(visit, round=rnd, verification_id=live.verification_id,
                               elapsed_s=round(time.monotonic() - started, 3))  # fmt: skip


def change_label(change: Change) -> str:
    """A change as a probe's progress and its runs' labels name it (its value masked)."""
    return f"{change.service}:{change.knob}={mask(change.knob, change.bad)}"


def _labels(changes: Sequence[Change], indices: Sequence[int]) -> str:
    return ", ".join(change_label(changes[i]) for i in indices) or "no change"


def _tally(visits: Sequence[ProbeVisit], arm: str) -> ArmTally:
    mine = [v for v in visits if v.arm == arm]
    return ArmTally(arm, None, sum(v.units for v in mine), sum(v.failed for v in mine))


async def _probe(op: Operation, run: _Run, step: NextProbe, number: int) -> ProbeRecord:
    """Round after round until the probe is decided or its rounds run out."""
    start, started = run.start, time.monotonic()
    labels = tuple(change_label(c) for c in step.changes)
    op.say(ProbeStarted(number, labels))
    visits: list[ProbeVisit] = []
    outcome, load = None, None
    for rnd in range(start.rounds):
        for arm in round_order(rnd):
            op.say(VisitStarted(len(visits), 2 * start.rounds, arm))
            visits.append(await _visit(op, run, step, number, arm, rnd))
        bad, probe = _tally(visits, ARM_BAD), _tally(visits, ARM_PROBE)
        outcome, decision = judge_probe(bad, probe, alpha=start.alpha, effect=start.effect,
                                        rounds=start.rounds)  # fmt: skip
        if run.reference is not None:
            outcome, decision, load = guard_probe(outcome, decision, visits, run.reference)
        if outcome is not None:
            break
    decided = outcome or ProbeOutcome.UNDECIDED
    rounds = len(visits) // 2
    op.say(ProbeDecided(number, decided, rounds, probe.failed, probe.sessions, bad.failed,
                        bad.sessions, decision.p_value))  # fmt: skip
    return ProbeRecord(start.case_id, run.bisect_id, number, step.indices, decided, rounds, bad,
                       probe, decision, tuple(visits), round(time.monotonic() - started, 3),
                       load)  # fmt: skip


# -- the bisection ---------------------------------------------------------------------------


def _save_probe(ledger: Ledger, record: ProbeRecord) -> int:
    event = ledger.add(
        CaseEvent(at=NOW, case_id=record.case_id, kind=ProbeRecord.KIND, detail=encode(record))
    )
    note = f"bisect probe {record.number}: {record.outcome} (p={record.decision.p_value:.3g})"
    ledger.add(
        CaseEvidence(at=NOW, case_id=record.case_id, kind=ProbeRecord.KIND, ref_id=event, note=note)
    )
    return event


def _conclude(
    ledger: Ledger, run: _Run, result: Bisected, probes: Sequence[ProbeRecord]
) -> tuple[BisectConclusion, int, int]:
    start = run.start
    first = probes[0] if probes and probes[0].changes == () else None  # the good state's probe
    conclusion = BisectConclusion(
        start.case_id, run.bisect_id, result, bisect_verdicts(start.changes, result),
        sum(len(p.visits) for p in probes), round(sum(p.elapsed_s for p in probes), 3),
        None if first is None else first.bad.failed > 0,
    )  # fmt: skip
    event = ledger.add(
        CaseEvent(
            at=NOW, case_id=start.case_id, kind=BisectConclusion.KIND, detail=encode(conclusion)
        )
    )
    guilty = ", ".join(change_target(c) for c in result.changes)
    evidence = ledger.add(
        CaseEvidence(
            at=NOW,
            case_id=start.case_id,
            kind="bisect",
            ref_id=event,
            note=f"case bisect: guilty {guilty}" if guilty else "case bisect: nothing guilty",
        )
    )
    return conclusion, event, evidence


async def _search(
    op: Operation, ledger: Ledger, run: _Run, state: BisectState, done: list[ProbeRecord]
) -> BisectOutcome:
    """Probe until ddmin is done (each probe recorded as it ends), then conclude; the knobs
    left as found, also when interrupted."""
    changes = run.changes
    found = tuple([await get_knob(op, c.service, c.knob) for c in changes])
    knobs = [KnobBack(c.service, c.knob, v) for c, v in zip(changes, found, strict=True)]
    # A stop signal, or a failure (a probe's restart that did not come up): put back as found.
    async with as_found(op, knobs), as_found_on_failure(op, knobs):
        await _references(op, run)
        while not isinstance(step := next_step(state), Bisected):
            record = await _probe(op, run, step, len(done) + 1)
            _save_probe(ledger, record)
            done.append(record)
            state = record_probe(state, record.outcome)
        left = await _leave(op, changes, found)
    conclusion, event, evidence = _conclude(ledger, run, step, done)
    return BisectOutcome(run.bisect_id, run.start, tuple(done), conclusion, event, evidence, left)


async def _leave(
    op: Operation, changes: Sequence[Change], found: tuple[str | None, ...]
) -> tuple[str | None, ...]:
    """Put the knobs back as found (made live again when a visit left them otherwise)."""
    now = tuple([await get_knob(op, c.service, c.knob) for c in changes])
    if now != found:
        settings = [Setting(c.service, c.knob, v) for c, v in zip(changes, found, strict=True)]
        await make_live(op, settings, "case bisect: left as found", e2e=False)
    return found


def _workload(ledger: Ledger, case: Case, start: BisectRecord) -> SoakConfig | None:
    if start.test.kind is not ProbeTestKind.SOAK:
        return None
    return failing_workload(ledger, case, start.sessions)[1]


async def run_bisect(
    where: SpecOrOperation, ledger: Ledger, cfg: BisectConfig, *, progress: Progress | None = None
) -> BisectOutcome:
    """Find the changes, check them, record the bisection's start, and search (see the module
    docstring). Every input is checked before the start is recorded: a refused bisection
    leaves nothing on the case."""
    case = load_case(ledger, cfg.case_id)
    soak_id = None
    if cfg.test.kind is ProbeTestKind.SOAK:
        soak_id, _ = failing_workload(ledger, case, cfg.sessions)
    async with operation(where, ledger=ledger, progress=progress) as op:
        changes = cfg.changes
        if not changes and cfg.good is not None:
            changes = await find_changes(op, ledger, cfg.good, cfg.bad)
        if not changes:
            raise CaseError(f"no declared knob differs between {cfg.good} and {cfg.bad}")
        check_changes(op.spec, changes)
        state = start_bisect(changes)
        bench = _bench(cfg.bench, cfg.test)
        start = BisectRecord(cfg.case_id, state.changes, cfg.test, cfg.good or "",
                             cfg.bad if cfg.good else "", cfg.rounds, cfg.alpha, cfg.effect,
                             soak_id, cfg.sessions, cfg.runs, bench,
                             *bisect_owner(op, state.changes))  # fmt: skip
        workload, answers = _workload(ledger, case, start), _answers(op, start, bench)
        reference = _reference(case, start)
        bisect_id = ledger.add(
            CaseEvent(at=NOW, case_id=cfg.case_id, kind=BisectRecord.KIND, detail=encode(start))
        )
        op.say(BisectPlanned(cfg.case_id, len(changes), str(cfg.test), cfg.rounds))
        run = _Run(bisect_id, start, workload, bench, answers, reference, state.changes)
        return await _search(op, ledger, run, state, [])


def _answers(op: Operation, start: BisectRecord, bench: BenchConfig | None) -> AnswerSession | None:
    """An answers test's checking (its references: the good state's)."""
    if bench is None or (start.test.kind is not ProbeTestKind.ANSWERS and bench.answers is None):
        return None
    config = answers_bench(bench, start.test.concurrency).answers
    assert config is not None
    return AnswerSession(config, baseline_state(op, _settings(start.changes, ())), bench.model)


def _reference(case: Case, start: BisectRecord) -> LoadReference | None:
    """An answers test's load to reach while a probe's bad arm has not failed: where the case's
    wrong answers were seen (:func:`~servelab.core.case.load.case_reference`)."""
    if start.test.kind is not ProbeTestKind.ANSWERS:
        return None
    return case_reference(case.events, case.evidence, start.test.concurrency)


def _bench(bench: BenchConfig | None, test: ProbeTest) -> BenchConfig | None:
    """A threshold or answers test's runs: one at the test's concurrency each."""
    if bench is None or test.kind is ProbeTestKind.SOAK:
        return None
    return dataclasses.replace(bench, concurrencies=(test.concurrency,), repeat=1)


def unfinished(case: Case) -> tuple[int, BisectRecord, list[ProbeRecord]] | None:
    """The case's newest bisection without a conclusion, with its probes (None: there is none)."""
    ended = {decode(BisectConclusion, e.detail).bisect_id for e in case.events
             if e.kind == BisectConclusion.KIND}  # fmt: skip
    starts = [e for e in case.events if e.kind == BisectRecord.KIND and e.id not in ended]
    if not starts:
        return None
    newest = starts[-1]
    probes = [decode(ProbeRecord, e.detail) for e in case.events if e.kind == ProbeRecord.KIND]
    mine = [p for p in probes if p.bisect_id == newest.id]
    return newest.id, decode(BisectRecord, newest.detail), mine


async def resume_bisect(
    where: SpecOrOperation, ledger: Ledger, case_id: int, *, progress: Progress | None = None
) -> BisectOutcome:
    """Go on with the case's unfinished bisection: its probes replayed, the rest run."""
    case = load_case(ledger, case_id)
    found = unfinished(case)
    if found is None:
        raise CaseError(f"case {case_id} has no unfinished bisection to resume")
    bisect_id, start, probes = found
    hidden = [f"{c.service}:{c.knob}" for c in start.changes if REDACTED in f"{c.good}{c.bad}"]
    if hidden:
        raise CaseError(
            f"bisection {bisect_id}'s values of {', '.join(hidden)} were recorded masked (a "
            f"secret); start a new bisection (case bisect {case_id} --change ...)"
        )
    state = start_bisect(start.changes)
    if probes and probes[0].changes != ():  # an older servelab's: no good-state probe first
        raise CaseError(f"bisection {bisect_id} did not probe the good state first; start a "
                        f"new bisection (case bisect {case_id} --change ...)")  # fmt: skip
    for probe in probes:
        step = next_step(state)
        if isinstance(step, Bisected) or step.indices != probe.changes:
            raise CaseError(f"bisection {bisect_id}'s probe {probe.number} is not the one it asked")
        state = record_probe(state, probe.outcome)
    async with operation(where, ledger=ledger, progress=progress) as op:
        await refuse_anothers_bisect(op, bisect_id, start)
        op.say(BisectResumed(case_id, len(probes)))
        run = _Run(bisect_id, start, _workload(ledger, case, start), start.bench,
                   _answers(op, start, start.bench), _reference(case, start),
                   start.changes)  # fmt: skip
        return await _search(op, ledger, run, state, list(probes))
