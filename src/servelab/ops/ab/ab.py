"""Knob A/B with live-verified arms, counterbalanced rounds, an optional stopping rule, resumable.

For each visit of an arm: set the knob in the env file (with a backup), co-restart the service and
its dependents in order, then prove the value is live (config and live layers of ``verify``, and
the value read back from ``/proc/PID/environ``) — an arm that is not live is not measured. Then
benchmark through the router. A round is one visit of each arm, in a counterbalanced order (ABBA
or a seeded random order per round, :mod:`servelab.core.ab.design`), so slow drift of the machine
cancels instead of biasing one arm. At the end the original value is restored (unless ``keep``).

With ``until_decided`` a concurrency leaves the experiment once Lai's confidence sequence on its
per-round log ratios decides it (:mod:`servelab.core.ab.sequential`); the A/B stops when every
concurrency is decided or after ``max_rounds``, and reports its cost against the fixed design.

Every finished visit is saved in the A/B journal (:mod:`servelab.io.ledger.journal`) as it ends, so
an interrupted A/B (Ctrl-C, a lost SSH link; the knob is restored as ever) resumes with
:func:`resume_ab` from the next visit of its plan. The experiment is recorded in the ledger with
the shape the case/restore code reads.

The whole experiment is one :class:`~servelab.ops.context.Operation`: every visit's set, restart,
verify and live read-back go through the same hosts (one SSH connection per host for the run).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace

from servelab.core.ab.compare import compare_arms, curve_drops
from servelab.core.ab.design import BASELINE, fixed_design, spent, visit_plan
from servelab.core.ab.paired import log_ratios
from servelab.core.ab.sequential import UNDECIDED, first_decision
from servelab.core.telemetry.summary import generated_tokens_per_s
from servelab.errors import BenchError, ServelabError
from servelab.io.ledger.journal import FINISHED, INTERRUPTED, AbJournal
from servelab.io.ledger.ledger import Ledger
from servelab.ops.ab.config import STOP_DECIDED, STOP_MAX_ROUNDS, AbConfig, AbResult, ArmVisit
from servelab.ops.bench.bench import BenchProgressFn, run_bench
from servelab.ops.context import Operation, Progress, SpecOrOperation, operation
from servelab.ops.deploy.deploy import restart
from servelab.ops.knob import get_knob, live_knob, set_knob
from servelab.ops.progress import (
    AbJournalStarted,
    AbResumed,
    AbVisitStarted,
    KnobRestoring,
    KnobVerifiedLive,
)
from servelab.ops.telemetry.tracing import trace_collector
from servelab.ops.telemetry.watch import metrics_plan
from servelab.ops.verify.verify import verify

__all__ = [
    "AbConfig",
    "AbResult",
    "ArmVisit",
    "conclude",
    "resume_ab",
    "run_ab",
    "undecided_levels",
]


def _router_url(op: Operation) -> str:
    name = op.spec.router_name or op.spec.entry_point
    return op.spec.services[name].url


async def _make_live(
    op: Operation, cfg: AbConfig, value: str | None, reason: str
) -> tuple[int | None, str | None]:
    """Set the knob, co-restart, and prove it live end to end; raise when it is not."""
    await set_knob(op, cfg.service, cfg.knob, value, reason=reason)
    report = await restart(op, [cfg.service], verify_after=False)
    if not report.ok:
        failed = [s.service for s in report.steps if not s.ok]
        raise BenchError(f"restart for arm {value} failed ({', '.join(failed)}): arm not measured")
    # e2e too: it proves the KV path works with this value and pays the cold first request, which
    # would otherwise land in the measurement.
    proof = await verify(op.quiet(), [cfg.service], layers=("config", "live", "e2e"))
    live = await live_knob(op, cfg.service, cfg.knob)  # read back from /proc/PID/environ
    if not proof.ok or live != value:
        failed = [f"{c.layer} {c.service}: {c.code}" for c in proof.failures]
        reasons = "; ".join(failed) or f"live value {live!r}"
        raise BenchError(f"arm {cfg.knob}={value} is not live ({reasons}): arm not measured")
    op.say(KnobVerifiedLive(cfg.service, cfg.knob, value, proof.verification_id))
    return proof.verification_id, live


async def _measure(
    op: Operation,
    cfg: AbConfig,
    visit: ArmVisit,
    levels: tuple[int, ...],
    bench_progress: BenchProgressFn | None,
) -> None:
    """One bench run per concurrency through the router, each timed."""
    label = f"ab {cfg.service} {cfg.knob}={visit.arm} round {visit.round + 1}"
    plan = await metrics_plan(op)
    decodes = op.spec.by_role("decode")
    for conc in levels:
        bench = replace(cfg.bench, url=_router_url(op), concurrencies=(conc,), repeat=1,
                        label=label)  # fmt: skip
        t0 = time.monotonic()
        result = await run_bench(bench, progress=bench_progress, ledger=op.ledger, metrics=plan,
                                 traces=trace_collector(op.spec))  # fmt: skip
        visit.bench_s[conc] = time.monotonic() - t0
        visit.bench_run_ids += [r.run_id for r in result.runs if r.run_id is not None]
        visit.failed_requests += result.n_failed
        for lvl in result.levels:
            # The steady state (every slot busy) when the run had one; else the whole run.
            steady = lvl.steady_throughput
            visit.throughput[lvl.concurrency] = steady.mean if steady.n else lvl.throughput.mean
        served = [generated_tokens_per_s(r.telemetry, decodes) for r in result.runs if r.telemetry]
        if served and served[-1] is not None:
            visit.server_throughput[conc] = served[-1]


def undecided_levels(result: AbResult, rnd: int) -> tuple[int, ...]:
    """The concurrencies round ``rnd`` still measures: all of them in the fixed design; with the
    stopping rule, those the rounds before it left undecided."""
    cfg = result.config
    levels = tuple(cfg.bench.concurrencies)
    if not cfg.until_decided:
        return levels
    done = [v for v in result.visits if v.round < rnd]
    base = {c: [v.throughput[c] for v in done if v.arm == cfg.baseline and c in v.throughput]
            for c in levels}  # fmt: skip
    cand = {c: [v.throughput[c] for v in done if v.arm == cfg.candidate and c in v.throughput]
            for c in levels}  # fmt: skip
    alpha = 0.05
    return tuple(
        c
        for c in levels
        if first_decision(log_ratios(base[c], cand[c]), cfg.margin, alpha=alpha, looks=cfg.looks)[1]
        == UNDECIDED
    )


async def _visit(
    op: Operation,
    result: AbResult,
    position: int,
    rnd: int,
    side: str,
    levels: tuple[int, ...],
    bench_progress: BenchProgressFn | None,
) -> ArmVisit:
    cfg = result.config
    value = cfg.baseline if side == BASELINE else cfg.candidate
    # The first visit of a round is its first arm; the second visit's arm is the round's second.
    baseline_first = (position % 2 == 0) == (side == BASELINE)
    first, second = (cfg.baseline, cfg.candidate)[:: 1 if baseline_first else -1]
    op.say(AbVisitStarted(rnd, cfg.rounds, first, second, cfg.knob, value))
    t0 = time.monotonic()
    vid, live = await _make_live(op, cfg, value, f"ab: arm {value}, round {rnd + 1}")
    visit = ArmVisit(value, rnd, vid, live, {}, 0, [], position, f"{first}→{second}",
                     time.monotonic() - t0)  # fmt: skip
    await _measure(op, cfg, visit, levels, bench_progress)
    return visit


async def _visits(
    op: Operation,
    result: AbResult,
    journal: AbJournal | None,
    bench_progress: BenchProgressFn | None,
) -> None:
    """Every visit of the plan not yet done, each saved as it ends; stop once all decided."""
    cfg = result.config
    plan = visit_plan(cfg.rounds, cfg.order, cfg.order_seed)
    for position, (rnd, side) in enumerate(plan):
        if position < len(result.visits):
            continue  # finished before an interruption: kept
        levels = undecided_levels(result, rnd)
        if not levels:
            result.stopped = STOP_DECIDED
            return
        visit = await _visit(op, result, position, rnd, side, levels, bench_progress)
        result.visits.append(visit)
        if journal is not None and result.session_id is not None:
            journal.add_visit(result.session_id, position, visit.to_json())
    if cfg.until_decided:
        result.stopped = (
            STOP_DECIDED if not undecided_levels(result, cfg.rounds) else STOP_MAX_ROUNDS
        )


async def run_ab(
    target: SpecOrOperation,
    cfg: AbConfig,
    *,
    ledger: Ledger | None = None,
    progress: Progress | None = None,
    bench_progress: BenchProgressFn | None = None,
) -> AbResult:
    """Run the counterbalanced A/B; restore the original value unless ``cfg.keep``."""
    if cfg.baseline == cfg.candidate:
        raise BenchError("the two arms have the same value")
    async with operation(target, ledger=ledger, progress=progress) as op:
        original = await get_knob(op, cfg.service, cfg.knob)
        result = AbResult(cfg, original)
        journal = AbJournal(op.ledger) if op.ledger is not None else None
        if journal is not None:
            result.session_id = journal.start(service=cfg.service, knob=cfg.knob,
                                              config=cfg.to_dict(), original=original)  # fmt: skip
            op.say(AbJournalStarted(result.session_id))
        return await _run(op, result, journal, bench_progress)


async def resume_ab(
    target: SpecOrOperation,
    session_id: int,
    *,
    ledger: Ledger,
    progress: Progress | None = None,
    bench_progress: BenchProgressFn | None = None,
) -> AbResult:
    """Pick up journalled A/B ``session_id``: keep its finished visits, run the rest of its plan."""
    journal = AbJournal(ledger)
    session = journal.get(session_id)
    if session is None:
        raise BenchError(f"no A/B {session_id} in the journal of {ledger.path}")
    if session.status == FINISHED:
        raise BenchError(f"A/B {session_id} is already finished (ab_runs {session.ab_id})")
    cfg = AbConfig.from_dict(session.config)
    result = AbResult(cfg, session.original, session_id=session_id, resumed=True)
    result.visits = [ArmVisit.from_json(v) for v in session.visits]
    async with operation(target, ledger=ledger, progress=progress) as op:
        op.say(AbResumed(session_id, len(result.visits)))
        return await _run(op, result, journal, bench_progress)


async def _run(
    op: Operation,
    result: AbResult,
    journal: AbJournal | None,
    bench_progress: BenchProgressFn | None,
) -> AbResult:
    cfg = result.config
    try:
        await _visits(op, result, journal, bench_progress)
    except BaseException:
        # Put the original value back, but never hide why the experiment stopped.
        with contextlib.suppress(ServelabError):
            await _restore(op, cfg, result.original, result)
        if journal is not None and result.session_id is not None:
            with contextlib.suppress(ServelabError):
                journal.set_status(result.session_id, INTERRUPTED)
        raise
    await _restore(op, cfg, result.original, result)
    conclude(result)
    if op.ledger is not None:
        result.ab_id = op.ledger.record_ab(
            service=cfg.service, knob=cfg.knob, config=cfg.to_dict(), result=result.record()
        )
        if journal is not None and result.session_id is not None:
            journal.set_status(result.session_id, FINISHED, result.ab_id)
    return result


async def _restore(op: Operation, cfg: AbConfig, original: str | None, result: AbResult) -> None:
    if cfg.keep:
        return
    op.say(KnobRestoring(cfg.service, cfg.knob, original))
    await _make_live(op, cfg, original, "ab: restore the original value")
    result.restored = True


def conclude(result: AbResult) -> None:
    """Comparisons, decisions, anomalies and cost of the visits so far."""
    cfg = result.config
    base, cand = result.throughput(cfg.baseline), result.throughput(cfg.candidate)
    result.comparisons = compare_arms(
        base, cand, baseline_label=cfg.baseline, candidate_label=cfg.candidate, margin=cfg.margin,
        looks=cfg.looks,
    )  # fmt: skip
    result.decided = {
        c: first_decision(log_ratios(base[c], cand[c]), cfg.margin, looks=cfg.looks)
        for c in sorted(set(base) & set(cand))
    }
    result.drops = curve_drops(cfg.baseline, base) + curve_drops(cfg.candidate, cand)
    result.anomalies = [d for d in result.drops if d.significant]
    costs = [v.cost for v in result.visits]
    result.cost = spent(costs, result.rounds_run, cfg.gpus)
    result.fixed_cost = fixed_design(costs, cfg.rounds, cfg.bench.concurrencies, cfg.gpus)
