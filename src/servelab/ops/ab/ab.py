"""Knob A/B with live-verified arms, counterbalanced rounds, an optional stopping rule, resumable.

For each visit of an arm: set the knob in the env file (with a backup), co-restart the service and
its dependents in order, then prove the value is live (config and live layers of ``verify``, and
the value read back from ``/proc/PID/environ``) — an arm that is not live is not measured. Then
benchmark through the router. Both steps are :mod:`servelab.ops.arm`'s, which ``tune`` and
``case bisect`` share. A round is one visit of each arm, in a counterbalanced order (ABBA
or a seeded random order per round, :mod:`servelab.core.ab.design`), so slow drift of the machine
cancels instead of biasing one arm. At the end the original value is restored, or with ``keep``
the value it names is left live (the better arm, one arm, or a value: an undecided ``better``
restores); an interrupted A/B always restores the original.

Each visit is measured by the A/B's metric: output tok/s per concurrency (the steady state's),
goodput per concurrency (requests/s that met the SLO), or the capacity (one bounded search for the
largest load meeting the SLO, :mod:`servelab.ops.bench.capacity`). With ``until_decided`` a
concurrency leaves the experiment once Lai's confidence sequence on its
per-round log ratios decides it (:mod:`servelab.core.ab.sequential`); the A/B stops when every
concurrency is decided or after ``max_rounds``, and reports its cost against the fixed design.

Every finished visit is saved in the A/B journal (:mod:`servelab.io.ledger.journal`) as it ends, so
an interrupted A/B (Ctrl-C, a lost SSH link; the knob is restored as ever) resumes with
:func:`resume_ab` from the next visit of its plan. The result is the one A/B result type,
:class:`~servelab.core.ab.result.AbResult`, grown visit by visit and worked out by
:func:`~servelab.core.ab.result.conclude`; it is recorded in the ledger as it is.

The whole experiment is one :class:`~servelab.ops.context.Operation`: every visit's set, restart,
verify and live read-back go through the same hosts (one SSH connection per host for the run).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace

from servelab.core.ab.design import BASELINE, visit_plan
from servelab.core.ab.events import (
    AbJournalStarted,
    AbResumed,
    AbVisitStarted,
    KnobKept,
    KnobRestoring,
)
from servelab.core.ab.result import (
    AbMetric,
    AbResult,
    ArmVisit,
    conclude,
    kept_value,
    not_kept,
    undecided_levels,
)
from servelab.core.answers.contract import AnswersUnchecked, probes_per_run
from servelab.core.answers.judge import AnswersJudgement
from servelab.core.bench.contract import BenchProgressFn
from servelab.core.deploy.putback import KnobBack
from servelab.core.ledger.codec import decode, encode
from servelab.errors import BenchError, RecordError, ServelabError
from servelab.io.ledger.journal import AbJournal, SessionStatus
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.owners import RunKind
from servelab.ops.ab.checks import check_arms, check_keep
from servelab.ops.ab.config import AbConfig
from servelab.ops.ab.owner import journal_owner, refuse_anothers_run, refuse_unowned_elsewhere
from servelab.ops.answers.session import AnswerSession, baseline_state
from servelab.ops.arm import Setting, make_live, measure
from servelab.ops.armfailure import as_found_on_failure
from servelab.ops.bench.recorded import recorded_trace
from servelab.ops.context import Operation, Progress, SpecOrOperation, operation
from servelab.ops.deploy.putback import as_found
from servelab.ops.deploy.refused import put_back_on_failure
from servelab.ops.deploy.upcheck import refuse_not_up
from servelab.ops.knob import get_knob
from servelab.ops.reads import refuse_unread

__all__ = ["resume_ab", "run_ab", "unchecked"]

#: What to do when a journalled A/B's trace, recorded as a relative path, is not found here.
RESUME_HINT = "resume from the directory the A/B ran in, or start a new `servelab ab`"
#: The reason recorded with the original value written back when the A/B's last step failed.
KEEP_FAILED = "ab: put back as found: the A/B's last step failed"


async def _make_live(
    op: Operation, cfg: AbConfig, value: str | None, reason: str
) -> tuple[int | None, str | None, tuple[str, ...]]:
    """The arm at ``value`` made live (:func:`servelab.ops.arm.make_live`): its proof, and
    the pair layer's failed checks (the arm's finding)."""
    arm = await make_live(op, [Setting(cfg.service, cfg.knob, value)], reason)
    return arm.verification_id, arm.live[0], arm.pair_failed


def unchecked(cfg: AbConfig) -> AnswersUnchecked | None:
    """Why answers asked for cannot be checked in this A/B (None: they can, or were not asked
    for): a capacity search or a trace carries no probes, nor a run too short for one."""
    answers = cfg.answers
    if answers is None or not answers.on:
        return None
    if cfg.metric == AbMetric.CAPACITY:
        return AnswersUnchecked.CAPACITY
    if cfg.bench.trace is not None:
        return AnswersUnchecked.TRACE
    if not probes_per_run(cfg.bench.requests, answers.share, answers.probes):
        return AnswersUnchecked.TOO_FEW_REQUESTS
    return None


def _answers(op: Operation, cfg: AbConfig) -> AnswerSession | None:
    """The A/B's answer checking (None: ``--answers off``, or :func:`unchecked` says why not)."""
    answers = cfg.answers
    if answers is None or not answers.on or unchecked(cfg) is not None:
        return None
    state = baseline_state(op, [Setting(cfg.service, cfg.knob, cfg.baseline)])
    return AnswerSession(answers, state, cfg.bench.model)


async def _measure(
    op: Operation,
    cfg: AbConfig,
    visit: ArmVisit,
    levels: tuple[int, ...],
    bench_progress: BenchProgressFn | None,
    session: AnswerSession | None,
) -> ArmVisit:
    """One bench run per concurrency through the router, each timed (or, comparing capacity,
    one capacity search): ``visit`` measured by the A/B's metric; with answers checked, the
    baseline's first visit takes (or finds) the references first."""
    label = f"ab {cfg.service} {cfg.knob}={visit.arm} round {visit.round + 1}"
    bench = cfg.bench if session is None else replace(cfg.bench, answers=session.config)
    if session is not None and visit.arm == cfg.baseline:
        await session.ensure(op)
    got = await measure(op, bench, levels, label, bench_progress, metric=cfg.metric,
                        visit=visit.position, round_=visit.round, span_s=cfg.span_s)  # fmt: skip
    return replace(visit, throughput=got.throughput, failed_requests=got.failed_requests,
                   bench_run_ids=got.bench_run_ids, bench_s=got.bench_s,
                   server_throughput=got.server_throughput, load_requests=got.requests,
                   answers=None if session is None else got.answers)  # fmt: skip


async def _visit(
    op: Operation,
    cfg: AbConfig,
    position: int,
    rnd: int,
    side: str,
    levels: tuple[int, ...],
    bench_progress: BenchProgressFn | None,
    session: AnswerSession | None,
) -> ArmVisit:
    value = cfg.baseline if side == BASELINE else cfg.candidate
    # The first visit of a round is its first arm; the second visit's arm is the round's second.
    baseline_first = (position % 2 == 0) == (side == BASELINE)
    first, second = (cfg.baseline, cfg.candidate)[:: 1 if baseline_first else -1]
    op.say(AbVisitStarted(rnd, cfg.rounds, first, second, cfg.knob, value))
    t0 = time.monotonic()
    vid, live, pair_failed = await _make_live(op, cfg, value, f"ab: arm {value}, round {rnd + 1}")
    visit = ArmVisit(value, rnd, vid, live, {}, 0, (), position, f"{first}→{second}",
                     time.monotonic() - t0, pair_failed=pair_failed or None)  # fmt: skip
    return await _measure(op, cfg, visit, levels, bench_progress, session)


async def _visits(
    op: Operation,
    cfg: AbConfig,
    result: AbResult,
    journal: AbJournal | None,
    bench_progress: BenchProgressFn | None,
    done: list[ArmVisit],
    session: AnswerSession | None,
) -> None:
    """Every visit of the plan not yet in ``done``, each appended and saved as it ends; stop once
    every concurrency is decided."""
    session_id = result.design.session_id
    for position, (rnd, side) in enumerate(visit_plan(cfg.rounds, cfg.order, cfg.order_seed)):
        if position < len(done):
            continue  # finished before an interruption: kept
        levels = undecided_levels(replace(result, visits=tuple(done)), rnd)
        if not levels:
            return
        visit = await _visit(op, cfg, position, rnd, side, levels, bench_progress, session)
        done.append(visit)
        if journal is not None and session_id is not None:
            journal.add_visit(session_id, position, visit)


async def run_ab(
    target: SpecOrOperation,
    cfg: AbConfig,
    *,
    ledger: Ledger | None = None,
    progress: Progress | None = None,
    bench_progress: BenchProgressFn | None = None,
    allow_unread: bool = False,
) -> AbResult:
    """Run the counterbalanced A/B; restore the original value, or leave the one ``cfg.keep``
    names. A deployment not up (:func:`~servelab.ops.deploy.upcheck.refuse_not_up`), and a knob
    the running engine does not read (:func:`~servelab.ops.reads.refuse_unread`, unless
    ``allow_unread``), are refused before anything changes."""
    if cfg.baseline == cfg.candidate:
        raise BenchError("the two arms have the same value")
    async with operation(target, ledger=ledger, progress=progress) as op:
        check_arms(op.spec, cfg.service, cfg.knob, (cfg.baseline, cfg.candidate))
        arms = (cfg.baseline, cfg.candidate)
        cfg = replace(cfg, keep=check_keep(op.spec, cfg.service, cfg.knob, cfg.keep, arms))
        if not allow_unread:
            await refuse_unread(op, cfg.service, [cfg.knob])
        await refuse_not_up(op, "ab")  # before anything is started, stopped or journalled
        original = await get_knob(op, cfg.service, cfg.knob)
        journal = AbJournal(op.ledger) if op.ledger is not None else None
        session_id = None
        if journal is not None:
            session_id = journal.start(service=cfg.service, knob=cfg.knob, config=encode(cfg),
                                       original=original,
                                       owner=journal_owner(op, cfg.service))  # fmt: skip
            op.say(AbJournalStarted(session_id, op.loaded.spec_args))
        result = cfg.result(original, session_id=session_id)
        return await _run(op, cfg, result, journal, bench_progress, [])


async def resume_ab(
    target: SpecOrOperation,
    session_id: int,
    *,
    ledger: Ledger,
    progress: Progress | None = None,
    bench_progress: BenchProgressFn | None = None,
) -> AbResult:
    """Pick up journalled A/B ``session_id``: keep its finished visits, run the rest of its plan.
    Another deployment's A/B is refused first (:mod:`servelab.ops.ab.owner`), nothing changed."""
    journal = AbJournal(ledger)
    session = journal.get(session_id)
    if session is None:
        raise BenchError(f"no A/B {session_id} in the journal of {ledger.path}")
    if session.status == SessionStatus.FINISHED:
        raise BenchError(f"A/B {session_id} is already finished (ab_runs {session.ab_id})")
    try:
        cfg = decode(AbConfig, session.config)
    except RecordError as exc:
        raise journal.damaged(f"ab_sessions (A/B {session_id}) config", "an A/B", exc) from None
    cfg = replace(cfg, bench=recorded_trace(cfg.bench, "ab", RESUME_HINT))
    owned = refuse_anothers_run(ledger, RunKind.AB, session_id, target, cfg.service)
    result = cfg.result(session.original, session_id=session_id, resumed=True)
    kept = list(session.visits)
    async with operation(target, ledger=ledger, progress=progress) as op:
        if not owned:
            setting = (cfg.service, cfg.knob, session.original)
            await refuse_unowned_elsewhere(op, RunKind.AB, session_id, [setting])
        await refuse_not_up(op, "ab --resume")  # as a new A/B is: nothing restarted first
        op.say(AbResumed(session_id, len(kept)))
        return await _run(op, cfg, result, journal, bench_progress, kept)


async def _run(
    op: Operation,
    cfg: AbConfig,
    result: AbResult,
    journal: AbJournal | None,
    bench_progress: BenchProgressFn | None,
    visits: list[ArmVisit],
) -> AbResult:
    """Run the visits ``visits`` lacks, put the original value back, work the result out and
    record it."""
    session_id = result.design.session_id
    answers = _answers(op, cfg)
    found = [KnobBack(cfg.service, cfg.knob, result.original)]
    try:
        # A stop signal, or a failure (an arm's restart that did not come up, its why kept):
        # the original value put back, what is still down named.
        async with as_found(op, found), as_found_on_failure(op, found):
            await _visits(op, cfg, result, journal, bench_progress, visits, answers)
    except BaseException:
        if journal is not None and session_id is not None:
            with contextlib.suppress(ServelabError):
                journal.set_status(session_id, SessionStatus.INTERRUPTED)
        raise
    result = conclude(replace(result, visits=tuple(visits), answers_unchecked=unchecked(cfg)))
    if answers is not None:
        await answers.stored(op)  # resumed after every baseline visit: the ledger's
        result = replace(result, answers=_judged(answers, cfg, visits))
    kept = kept_value(cfg.keep, result)
    try:
        async with as_found(op, found):
            await _leave(op, cfg, kept, result.original, visits)
    except BaseException as exc:
        if journal is not None and session_id is not None:
            failed = isinstance(exc, Exception)  # else a stop signal: put back, interrupted
            with contextlib.suppress(ServelabError):
                journal.set_status(session_id, SessionStatus.FAILED if failed
                                   else SessionStatus.INTERRUPTED)  # fmt: skip
        raise
    why = not_kept(cfg.keep, result)
    result = replace(result, restored=kept is None, kept=kept, not_kept=why)
    if op.ledger is not None:
        ab_id = op.ledger.record_ab(config=encode(cfg), result=result)
        result = replace(result, ab_id=ab_id)
        if journal is not None and session_id is not None:
            journal.set_status(session_id, SessionStatus.FINISHED, ab_id)
    return result


def _judged(
    session: AnswerSession, cfg: AbConfig, visits: list[ArmVisit]
) -> AnswersJudgement | None:
    """The two arms' answers judged over every visit."""
    answered = [(v.arm, v.round, v.answers) for v in visits if v.answers is not None]
    requests = sum(_requests(cfg, v) for v in visits if v.answers is not None)
    return session.judge(cfg.baseline, cfg.candidate, answered, requests=requests)


def _requests(cfg: AbConfig, visit: ArmVisit) -> int:
    """The load requests a visit sent beside its probes (a visit recorded before they were
    counted: its levels' runs, as configured)."""
    if visit.load_requests is not None:
        return visit.load_requests
    return cfg.bench.requests * len(visit.throughput)


async def _restore(op: Operation, cfg: AbConfig, original: str | None) -> None:
    """Put the original value back, live."""
    op.say(KnobRestoring(cfg.service, cfg.knob, original))
    await _make_live(op, cfg, original, "ab: restore the original value")


async def _leave(
    op: Operation, cfg: AbConfig, kept: str | None, original: str | None, visits: list[ArmVisit]
) -> None:
    """The A/B's last step: the original value restored, or ``kept`` left live. A value the
    deployment does not take (the engine exits on it) puts the original back and raises
    :class:`~servelab.ops.deploy.refused.PutBackAfterFailure` naming what it did."""
    try:
        if kept is None:
            await _restore(op, cfg, original)
        else:
            await _keep(op, cfg, kept, visits)
    except ServelabError as exc:
        what = "restoring the original value" if kept is None else f"keeping {kept}"
        await put_back_on_failure(op, [KnobBack(cfg.service, cfg.knob, original)],
                                  BenchError(f"{what} failed: {exc}"), KEEP_FAILED)  # fmt: skip


async def _keep(op: Operation, cfg: AbConfig, value: str, visits: list[ArmVisit]) -> None:
    """Leave ``value`` live (``--keep``): already, when the last visit measured it; else set,
    co-restarted and proven live."""
    op.say(KnobKept(cfg.service, cfg.knob, value, cfg.keep or value))
    if not visits or visits[-1].arm != value:
        _, _, pair_failed = await _make_live(op, cfg, value, f"ab: keep {value} ({cfg.keep})")
        if pair_failed:  # a value no visit measured: its pair layer is checked here
            raise BenchError(f"{value}'s pair layer failed ({'; '.join(pair_failed)}): not kept")
