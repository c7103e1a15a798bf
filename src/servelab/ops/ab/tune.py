"""``servelab tune``: the best setting among K, by blocks of live-verified arms and elimination.

The arms are every combination of the knobs' values (:func:`servelab.core.ab.tunerun.grid`). With
``screen`` (``tune --screen``) the knobs are screened first: the runs of their two-level design
(:mod:`servelab.core.ab.screenrun`) are visited in blocks of every run, each made live and measured
exactly as an arm is, until every contrast is active or negligible or ``max_rounds`` blocks ran;
the tune's arms are then every combination of the knobs the screening could not rule out, the
others held at their low value (:func:`~servelab.core.ab.tunerun.follow_up_arms`; none: no tune,
the original values put back). A
block visits every arm still in the running, in a seeded Williams order; each visit is an arm made
live and measured exactly as ``ab`` does it (:mod:`servelab.ops.arm`: set, co-restart, proven
live, one bench run per concurrency through the router). After each block the rule of
:mod:`servelab.core.ab.tune` drops, at each concurrency, the arms shown worse than the leader, and
stops a concurrency once one arm is left, none can beat the leader by the margin, or
``max_rounds`` blocks ran; the tune ends when every concurrency has stopped, or before a block
that would outrun ``max_minutes`` (priced at the mean visit so far).

Every finished visit is saved as it ends (:class:`~servelab.io.ledger.tunes.TuneStore`), so an
interrupted tune resumes with :func:`resume_tune` from the next visit of its block; its state is
replayed from the visits (:func:`servelab.core.ab.tunerun.replay`). At the end the knobs' original
values are put back and proven live, unless ``keep_best`` and the concurrencies agree on a best arm
(:func:`~servelab.core.ab.tunerun.agreed_best`): that arm is made live and left. Interrupted, the
originals are put back too. The result is the one tune record,
:class:`~servelab.core.ab.tunerun.TuneRecord`, stored in the ledger as it is.

The config and its check are :mod:`servelab.ops.ab.tuneconfig`; ``tune --plan`` is
:mod:`servelab.ops.ab.tuneplan`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import replace

from servelab.core.ab.result import ArmVisit
from servelab.core.ab.screenrun import Screening
from servelab.core.ab.tune import TuneOutcome
from servelab.core.ab.tuneevents import (
    PricedFrom,
    TuneArmKept,
    TuneEliminated,
    TuneLevelStopped,
    TuneResumed,
    TuneScreened,
    TuneStarted,
    TuneVisitStarted,
)
from servelab.core.ab.tunerun import (
    NextBlock,
    TuneRecord,
    conclude_tune,
    follow_up_arms,
    objective_value,
    replay,
    screen,
    with_visits,
)
from servelab.core.bench.contract import BenchProgressFn
from servelab.core.deploy.putback import KnobBack
from servelab.core.ledger.codec import decode, encode
from servelab.errors import BenchError, ServelabError
from servelab.io.ledger.journal import SessionStatus
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.owners import RunKind
from servelab.io.ledger.tunes import TuneStore
from servelab.ops.ab.budget import mean_visit_s, over_budget, recorded_visit_s
from servelab.ops.ab.owner import journal_owner, refuse_anothers_run, refuse_unowned_elsewhere
from servelab.ops.ab.tuneanswers import judge_arms, tune_answers, tune_unchecked
from servelab.ops.ab.tuneconfig import TuneConfig, check_tune
from servelab.ops.answers.session import AnswerSession
from servelab.ops.arm import make_live, measure
from servelab.ops.armfailure import as_found_on_failure
from servelab.ops.bench.recorded import recorded_trace
from servelab.ops.context import Operation, Progress, SpecOrOperation, operation
from servelab.ops.deploy.putback import as_found
from servelab.ops.deploy.upcheck import refuse_not_up
from servelab.ops.knob import get_knob
from servelab.ops.reads import refuse_unread

__all__ = ["resume_tune", "run_tune"]

#: What to do when a journalled tune's trace, recorded as a relative path, is not found here.
TUNE_HINT = "resume from the directory the tune ran in, or start a new `servelab tune`"


# -- running ------------------------------------------------------------------------------------


def _live_label(cfg: TuneConfig, live: tuple[str | None, ...]) -> str | None:
    if len(live) == 1:
        return live[0]
    return ", ".join(f"{k.knob}={v}" for k, v in zip(cfg.knobs, live, strict=True))


async def _visit(
    op: Operation,
    cfg: TuneConfig,
    record: TuneRecord,
    block: NextBlock,
    index: int,
    values: tuple[str, ...],
    bench_progress: BenchProgressFn | None,
    session: AnswerSession | None = None,
) -> ArmVisit:
    """The arm ``block.order[index]``, the knobs at ``values``, made live and measured at the
    levels it still runs at; ``block`` is its phase's (the screening's, or the tune's); with
    ``session``, its runs carry the block's answer probes."""
    label = block.order[index]
    levels = block.levels[label]
    op.say(TuneVisitStarted(block.block, cfg.max_rounds, index, len(block.order), label, levels))
    t0 = time.monotonic()
    tune = "tune" if record.tune_id is None else f"tune {record.tune_id}"
    screening = record.screening
    phase = "tune" if screening is None or screening.follow_up is not None else "screening"
    why = f"{tune}: arm {label}, {phase} block {block.block}"
    live = await make_live(op, cfg.settings(values), why)
    overhead = time.monotonic() - t0
    position = len(record.all_visits)
    bench = cfg.bench if session is None else replace(cfg.bench, answers=session.config)
    got = await measure(op, bench, levels,
                        f"tune {cfg.names}={label} {phase} block {block.block}", bench_progress,
                        metric=cfg.metric, visit=position, round_=block.block - 1,
                        span_s=cfg.span_s)  # fmt: skip
    visit = ArmVisit(label, block.block - 1, live.verification_id, _live_label(cfg, live.live),
                     got.throughput, got.failed_requests, got.bench_run_ids, position,
                     "→".join(block.order), overhead, got.bench_s, got.server_throughput,
                     None if session is None else got.answers,
                     live.pair_failed or None)  # fmt: skip
    missing = [c for c in levels if objective_value(cfg.metric, visit, c) is None]
    if missing:
        at = ", ".join(f"C{c}" for c in missing)
        raise BenchError(
            f"arm {label} measured no {cfg.metric} at {at} ({got.failed_requests} request(s) "
            "failed): the tune stops here, its visits so far kept"
        )
    return visit


def _over_budget(cfg: TuneConfig, record: TuneRecord, done: Sequence[ArmVisit],
                 block: NextBlock) -> bool:  # fmt: skip
    """Whether the rest of ``block`` (of the phase whose visits are ``done``), priced at the
    mean visit so far of both phases, outruns ``max_minutes``."""
    if cfg.max_minutes is None or not record.all_visits:
        return False
    seconds = [v.cost.seconds for v in record.all_visits]
    left = sum(1 for a in block.order if not _done(done, block, a))
    return (sum(seconds) + left * sum(seconds) / len(seconds)) / 60.0 > cfg.max_minutes


def _price_up_front(op: Operation, cfg: TuneConfig, store: TuneStore | None, arms: int) -> bool:
    """With ``--max-minutes``, the first block priced from the recorded visits, said when it
    outruns the budget; whether a price was found (else the first visit prices it)."""
    price = None if cfg.max_minutes is None or store is None else recorded_visit_s(store)
    if price is None or cfg.max_minutes is None:
        return cfg.max_minutes is None
    warning = over_budget(arms, cfg.max_rounds, price, cfg.max_minutes, PricedFrom.RECORDED)
    if warning is not None:
        op.say(warning)
    return True


def _price_first(op: Operation, cfg: TuneConfig, record: TuneRecord, arms: int) -> bool:
    """After the tune's first visit (no recorded price), the first block priced from it, said
    when it outruns ``--max-minutes``; True once priced."""
    price = mean_visit_s(record.all_visits)
    if price is None or cfg.max_minutes is None:
        return cfg.max_minutes is None
    warning = over_budget(arms, cfg.max_rounds, price, cfg.max_minutes, PricedFrom.FIRST_VISIT)
    if warning is not None:
        op.say(warning)
    return True


def _done(visits: Sequence[ArmVisit], block: NextBlock, arm: str) -> bool:
    return any(v.round == block.block - 1 and v.arm == arm for v in visits)


def _tell(op: Operation, before: TuneRecord, after: TuneRecord) -> None:
    """Progress: the eliminations and stops the last block brought."""
    rule, levels = after.rule, after.levels
    old, _ = replay(after.labels, rule, levels, after.metric, before.visits)
    new, _ = replay(after.labels, rule, levels, after.metric, after.visits)
    for level, state in new.items():
        for e in state.eliminations[len(old[level].eliminations) :]:
            op.say(TuneEliminated(level, e.arm, e.block, e.lost_to))
        if state.done and not old[level].done:
            claims = state.outcome in (TuneOutcome.BEST, TuneOutcome.WITHIN_MARGIN)
            op.say(TuneLevelStopped(level, state.outcome, state.leader if claims else None))


async def _blocks(
    op: Operation,
    cfg: TuneConfig,
    record: TuneRecord,
    store: TuneStore | None,
    bench_progress: BenchProgressFn | None,
    session: AnswerSession | None = None,
    *,
    priced: bool = False,
) -> TuneRecord:
    """Run blocks until every level has stopped (or the time budget would be outrun); each
    visit saved as it ends (the tune's first, unless ``priced`` up front, prices the budget:
    :func:`_price_first`); after each block, with ``session``, the arms judged on their answers
    and those that change them dropped. Returns the record with every visit."""
    while True:
        _, block = replay(record.labels, record.rule, record.levels, record.metric, record.visits)
        if block is None:
            return record
        if _over_budget(cfg, record, record.visits, block):
            return replace(record, time_budget_hit=True)
        before = record
        for index, arm in enumerate(block.order):
            if _done(record.visits, block, arm):
                continue  # finished before an interruption: kept
            visit = await _visit(op, cfg, record, block, index, record.arm(arm).values,
                                 bench_progress, session)  # fmt: skip
            if store is not None and record.tune_id is not None:
                store.add_visit(record.tune_id, visit.position, visit)
            record = replace(record, visits=(*record.visits, visit))
            if not priced:
                priced = _price_first(op, cfg, record, len(block.order))
        if session is not None:
            record = judge_arms(op, session, cfg, record)
        _tell(op, before, record)


async def _screen(
    op: Operation,
    cfg: TuneConfig,
    record: TuneRecord,
    screening: Screening,
    store: TuneStore | None,
    bench_progress: BenchProgressFn | None,
    *,
    priced: bool = False,
) -> TuneRecord:
    """The screening's blocks until it stops (or the time budget would be outrun); each visit
    saved as it ends (the first prices the budget unless ``priced``). Returns the record with
    the screening and the tune's arms it leaves."""
    while True:
        screening, block = screen(screening, record.rule, record.levels, record.metric)
        record = replace(record, screening=screening)
        if block is None:
            break
        if _over_budget(cfg, record, screening.visits, block):
            return replace(record, time_budget_hit=True)
        for index, arm in enumerate(block.order):
            if _done(screening.visits, block, arm):
                continue  # finished before an interruption: kept
            visit = await _visit(op, cfg, record, block, index, screening.values(arm),
                                 bench_progress)  # fmt: skip
            if store is not None and record.tune_id is not None:
                store.add_visit(record.tune_id, visit.position, visit)
            screening = replace(screening, visits=(*screening.visits, visit))
            record = replace(record, screening=screening)
            if not priced:
                priced = _price_first(op, cfg, record, len(block.order))
    follow = screening.follow_up
    if follow is not None:
        op.say(TuneScreened(screening.blocks, follow.factors, follow.fixed))
    return replace(record, arms=follow_up_arms(record.knobs, screening))


async def _leave(op: Operation, cfg: TuneConfig, record: TuneRecord) -> TuneRecord:
    """The best arm made live and left (``keep_best``), else the original values put back."""
    if cfg.keep_best and record.best_unshown:
        op.say(TuneArmKept(None, record.best))
    elif cfg.keep_best and record.best is not None and _pair_failed(record, record.best):
        op.say(TuneArmKept(None, pair_failed=record.best))  # the arm's finding: never kept
    elif cfg.keep_best:
        op.say(TuneArmKept(record.best))
        if record.best is not None:
            await make_live(op, cfg.settings(record.arm(record.best).values), "tune: keep best")
            return replace(record, kept=record.best)
    await _restore(op, cfg, record)
    return replace(record, restored=True)


def _pair_failed(record: TuneRecord, label: str) -> bool:
    """Whether a visit of arm ``label`` failed the pair layer (the arm's finding: never kept)."""
    return any(v.pair_failed for v in record.all_visits if v.arm == label)


async def _restore(op: Operation, cfg: TuneConfig, record: TuneRecord) -> None:
    await make_live(op, cfg.settings(record.original), "tune: restore the original values")


async def _run(
    op: Operation,
    cfg: TuneConfig,
    record: TuneRecord,
    store: TuneStore | None,
    bench_progress: BenchProgressFn | None,
    *,
    priced: bool = True,
) -> TuneRecord:
    """The screening's blocks (if any is left), the tune's, then the knobs left as asked; the
    record worked out and stored. ``priced``: the budget was priced before (else the first
    visit prices it)."""
    found = [KnobBack(s.service, s.knob, s.value) for s in cfg.settings(record.original)]
    try:
        # A stop signal, or a failure (an arm's restart that did not come up, its why kept):
        # the original values put back, what is still down named.
        async with as_found(op, found), as_found_on_failure(op, found):
            record = await _search(op, cfg, record, store, bench_progress, priced=priced)
    except BaseException:
        if store is not None and record.tune_id is not None:
            with contextlib.suppress(ServelabError):
                store.set_status(record.tune_id, SessionStatus.INTERRUPTED)
        raise
    async with as_found(op, found), as_found_on_failure(op, found):
        record = await _leave(op, cfg, record)
    if store is not None and record.tune_id is not None:
        store.finish(record.tune_id, record)
    return record


async def _search(
    op: Operation,
    cfg: TuneConfig,
    record: TuneRecord,
    store: TuneStore | None,
    bench_progress: BenchProgressFn | None,
    *,
    priced: bool,
) -> TuneRecord:
    """The screening's blocks (if any is left), then the tune's; the record worked out."""
    session = await tune_answers(op, cfg, record)
    if record.screening is not None and record.screening.follow_up is None:
        record = await _screen(op, cfg, record, record.screening, store, bench_progress,
                               priced=priced)  # fmt: skip
        priced = True
    if session is not None:
        record = judge_arms(op, session, cfg, record)  # resumed: the drops so far
    blocks = await _blocks(op, cfg, record, store, bench_progress, session, priced=priced)
    return replace(conclude_tune(blocks), answers_unchecked=tune_unchecked(cfg))


async def run_tune(
    target: SpecOrOperation,
    cfg: TuneConfig,
    *,
    ledger: Ledger | None = None,
    progress: Progress | None = None,
    bench_progress: BenchProgressFn | None = None,
    allow_unread: bool = False,
) -> TuneRecord:
    """Run the tune (see the module docstring); recorded in the operation's ledger, if any. A
    deployment not up (:func:`~servelab.ops.deploy.upcheck.refuse_not_up`) is refused first, and a
    knob the running engine does not read unless ``allow_unread``."""
    async with operation(target, ledger=ledger, progress=progress) as op:
        cfg = check_tune(op.spec, cfg)  # every value, before the first restart
        for knob in cfg.knobs if not allow_unread else ():
            await refuse_unread(op, knob.service, [knob.knob])
        await refuse_not_up(op, "tune")  # before anything is started, stopped or journalled
        original = tuple([await get_knob(op, k.service, k.knob) for k in cfg.knobs])
        store = TuneStore(op.ledger) if op.ledger is not None else None
        tune_id = None
        if store is not None:
            tune_id = store.start(knobs=cfg.names, config=encode(cfg), original=original,
                                  owner=journal_owner(op, cfg.knobs[0].service))  # fmt: skip
        record = cfg.record(original, tune_id=tune_id)
        first = record.arms if record.screening is None else record.screening.design.runs
        op.say(TuneStarted(tune_id, len(first), cfg.levels, cfg.max_rounds))
        priced = _price_up_front(op, cfg, store, len(first))
        return await _run(op, cfg, record, store, bench_progress, priced=priced)


async def resume_tune(
    target: SpecOrOperation,
    tune_id: int,
    *,
    ledger: Ledger,
    progress: Progress | None = None,
    bench_progress: BenchProgressFn | None = None,
) -> TuneRecord:
    """Pick up tune ``tune_id``: keep its finished visits, run the rest."""
    store = TuneStore(ledger)
    stored = store.get(tune_id)
    if stored is None:
        raise BenchError(f"no tune {tune_id} in {ledger.path}")
    if stored.status == SessionStatus.FINISHED:
        raise BenchError(f"tune {tune_id} is already finished")
    cfg = decode(TuneConfig, stored.config)
    # another deployment's tune refused first (:mod:`servelab.ops.ab.owner`), nothing changed
    owned = refuse_anothers_run(ledger, RunKind.TUNE, tune_id, target, cfg.knobs[0].service)
    cfg = check_tune(target.spec, cfg)  # as a new tune is: nothing runs on a value it refuses
    cfg = replace(cfg, bench=recorded_trace(cfg.bench, "tune", TUNE_HINT))
    record = with_visits(cfg.record(stored.original, tune_id=tune_id, resumed=True),
                         stored.visits)  # fmt: skip
    async with operation(target, ledger=ledger, progress=progress) as op:
        if not owned:
            pairs = zip(cfg.knobs, stored.original, strict=False)
            settings = [(k.service, k.knob, v) for k, v in pairs]
            await refuse_unowned_elsewhere(op, RunKind.TUNE, tune_id, settings)
        await refuse_not_up(op, "tune --resume")  # as a new tune is: nothing restarted first
        op.say(TuneResumed(tune_id, len(stored.visits)))
        return await _run(op, cfg, record, store, bench_progress)
