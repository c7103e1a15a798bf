"""Knob A/B with live-verified arms, counterbalanced rounds, an optional stopping rule, resumable.

For each visit of an arm: set the knob in the env file (with a backup), co-restart the service and
its dependents in order, then prove the value is live (config and live layers of ``verify``, and
the value read back from ``/proc/PID/environ``) — an arm that is not live is not measured. Then
benchmark through the router. A round is one visit of each arm, in a counterbalanced order (ABBA
or a seeded random order per round, :mod:`servelab.core.ab.design`), so slow drift of the machine
cancels instead of biasing one arm. At the end the original value is restored (unless ``keep``).

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
from servelab.core.ab.result import (
    CAPACITY_LEVEL,
    AbMetric,
    AbResult,
    ArmVisit,
    conclude,
    undecided_levels,
)
from servelab.core.ledger.codec import decode, encode
from servelab.core.telemetry.summary import generated_tokens_per_s
from servelab.errors import BenchError, ServelabError
from servelab.io.ledger.journal import AbJournal, SessionStatus
from servelab.io.ledger.ledger import Ledger
from servelab.ops.ab.config import AbConfig
from servelab.ops.arguments import argument_knob, engine_argument
from servelab.ops.bench.bench import BenchConfig, BenchProgressFn, LevelSummary, run_bench
from servelab.ops.bench.capacity import find_capacity
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
from servelab.ops.telemetry.watch import MetricsPlan, metrics_plan
from servelab.ops.verify.verify import verify

__all__ = ["resume_ab", "run_ab"]


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
    knob = argument_knob(op, cfg.knob)
    if live != value and not knob.is_env:
        # a process whose /proc argv is unreadable (sglang-router's) proves it by its own report
        reported = await engine_argument(op, cfg.service, knob)
        live = reported.value if reported.known else live
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
) -> ArmVisit:
    """One bench run per concurrency through the router, each timed (or, comparing capacity,
    one capacity search): ``visit`` measured by the A/B's metric."""
    label = f"ab {cfg.service} {cfg.knob}={visit.arm} round {visit.round + 1}"
    plan = await metrics_plan(op)
    template = replace(cfg.bench, url=_router_url(op), repeat=1, label=label)
    if template.trace is not None:
        # A trace's words come from the seed: each visit its own, so no visit finds the one
        # before's prompts in the engines' prefix caches (the trace's own sharing stays).
        template = replace(template, seed=template.seed + visit.position)
    if cfg.metric == AbMetric.CAPACITY:
        return await _capacity(op, template, visit, plan, bench_progress)
    decodes = op.spec.by_role("decode")
    values: dict[int, float] = {}
    bench_s: dict[int, float] = {}
    served: dict[int, float] = {}
    run_ids: list[int] = []
    failed = 0
    for conc in levels:
        bench = replace(template, concurrencies=(conc,))
        t0 = time.monotonic()
        result = await run_bench(bench, progress=bench_progress, ledger=op.ledger, metrics=plan,
                                 traces=trace_collector(op.spec))  # fmt: skip
        bench_s[conc] = time.monotonic() - t0
        run_ids += [r.run_id for r in result.runs if r.run_id is not None]
        failed += result.n_failed
        for lvl in result.levels:
            values[lvl.concurrency] = _value(cfg.metric, lvl)
        counted = [generated_tokens_per_s(r.telemetry, decodes) for r in result.runs if r.telemetry]
        if cfg.metric == AbMetric.THROUGHPUT and counted and counted[-1] is not None:
            served[conc] = counted[-1]  # the servers' own tok/s: a cross-check of throughput
    return replace(visit, throughput=values, failed_requests=failed,
                   bench_run_ids=tuple(run_ids), bench_s=bench_s,
                   server_throughput=served)  # fmt: skip


def _value(metric: AbMetric, level: LevelSummary) -> float:
    """A level's value of ``metric``: the steady state's output tok/s when the run had one
    (else the whole run's), or the goodput."""
    if metric == AbMetric.GOODPUT:
        return level.goodput or 0.0
    steady = level.steady_throughput
    return steady.mean if steady.n else level.throughput.mean


async def _capacity(
    op: Operation,
    template: BenchConfig,
    visit: ArmVisit,
    plan: MetricsPlan | None,
    bench_progress: BenchProgressFn | None,
) -> ArmVisit:
    """One capacity search: its estimate where the binding objective crosses its limit, else
    the largest load that held (a search that never met the SLO stops the A/B)."""
    t0 = time.monotonic()
    found = await find_capacity(template, progress=bench_progress, ledger=op.ledger, metrics=plan)
    cap = found.capacity
    value = cap.estimate if cap.estimate is not None else cap.capacity
    if value is None:
        raise BenchError(f"arm {visit.arm}: the SLO was not met at any load tried ({cap.stop}): "
                         "no capacity to compare")  # fmt: skip
    run_ids = tuple(r.run_id for r in found.runs if r.run_id is not None)
    return replace(visit, throughput={CAPACITY_LEVEL: value}, failed_requests=found.n_failed,
                   bench_run_ids=run_ids,
                   bench_s={CAPACITY_LEVEL: time.monotonic() - t0})  # fmt: skip


async def _visit(
    op: Operation,
    cfg: AbConfig,
    position: int,
    rnd: int,
    side: str,
    levels: tuple[int, ...],
    bench_progress: BenchProgressFn | None,
) -> ArmVisit:
    value = cfg.baseline if side == BASELINE else cfg.candidate
    # The first visit of a round is its first arm; the second visit's arm is the round's second.
    baseline_first = (position % 2 == 0) == (side == BASELINE)
    first, second = (cfg.baseline, cfg.candidate)[:: 1 if baseline_first else -1]
    op.say(AbVisitStarted(rnd, cfg.rounds, first, second, cfg.knob, value))
    t0 = time.monotonic()
    vid, live = await _make_live(op, cfg, value, f"ab: arm {value}, round {rnd + 1}")
    visit = ArmVisit(value, rnd, vid, live, {}, 0, (), position, f"{first}→{second}",
                     time.monotonic() - t0)  # fmt: skip
    return await _measure(op, cfg, visit, levels, bench_progress)


async def _visits(
    op: Operation,
    cfg: AbConfig,
    result: AbResult,
    journal: AbJournal | None,
    bench_progress: BenchProgressFn | None,
    done: list[ArmVisit],
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
        visit = await _visit(op, cfg, position, rnd, side, levels, bench_progress)
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
) -> AbResult:
    """Run the counterbalanced A/B; restore the original value unless ``cfg.keep``."""
    if cfg.baseline == cfg.candidate:
        raise BenchError("the two arms have the same value")
    async with operation(target, ledger=ledger, progress=progress) as op:
        original = await get_knob(op, cfg.service, cfg.knob)
        journal = AbJournal(op.ledger) if op.ledger is not None else None
        session_id = None
        if journal is not None:
            session_id = journal.start(service=cfg.service, knob=cfg.knob, config=encode(cfg),
                                       original=original)  # fmt: skip
            op.say(AbJournalStarted(session_id))
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
    """Pick up journalled A/B ``session_id``: keep its finished visits, run the rest of its plan."""
    journal = AbJournal(ledger)
    session = journal.get(session_id)
    if session is None:
        raise BenchError(f"no A/B {session_id} in the journal of {ledger.path}")
    if session.status == SessionStatus.FINISHED:
        raise BenchError(f"A/B {session_id} is already finished (ab_runs {session.ab_id})")
    cfg = decode(AbConfig, session.config)
    result = cfg.result(session.original, session_id=session_id, resumed=True)
    kept = list(session.visits)
    async with operation(target, ledger=ledger, progress=progress) as op:
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
    try:
        await _visits(op, cfg, result, journal, bench_progress, visits)
    except BaseException:
        # Put the original value back, but never hide why the experiment stopped.
        with contextlib.suppress(ServelabError):
            await _restore(op, cfg, result.original)
        if journal is not None and session_id is not None:
            with contextlib.suppress(ServelabError):
                journal.set_status(session_id, SessionStatus.INTERRUPTED)
        raise
    restored = await _restore(op, cfg, result.original)
    result = conclude(replace(result, visits=tuple(visits), restored=restored))
    if op.ledger is not None:
        ab_id = op.ledger.record_ab(config=encode(cfg), result=result)
        result = replace(result, ab_id=ab_id)
        if journal is not None and session_id is not None:
            journal.set_status(session_id, SessionStatus.FINISHED, ab_id)
    return result


async def _restore(op: Operation, cfg: AbConfig, original: str | None) -> bool:
    """Put the original value back, live (not with ``keep``); whether it was."""
    if cfg.keep:
        return False
    op.say(KnobRestoring(cfg.service, cfg.knob, original))
    await _make_live(op, cfg, original, "ab: restore the original value")
    return True
