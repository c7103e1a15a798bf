"""``investigate --symptom slow``: reproduce against the last recorded baseline, and test each
recorded change by an A/B of its two values.

Reproduce (:func:`reproduce_slow`): the newest usable ``servelab bench`` or ``ab`` of the
deployment (:func:`servelab.core.investigate.slow.search_baseline`: one too small to compare with
is passed over and named) is run again with its own config (at least
two runs per concurrency, so the interval exists), recorded and attached to the case, and compared
with it (:func:`servelab.core.investigate.slow.compare_to_baseline`). Decide (:func:`slow_test`):
``ab`` (:func:`servelab.ops.ab.ab.run_ab`) of the suspected value against the good one on that
workload, judged by :func:`servelab.core.case.abtest.judge_slow`, recorded on the case as the
event ``ab_test`` with its evidence row (``case resolve`` reads it). No wording here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from servelab.core.ab.record import AbRunRecord
from servelab.core.bench.contract import BenchConfig
from servelab.core.bench.record import BenchRunRecord
from servelab.core.case.abtest import AbTestRecord, judge_slow
from servelab.core.case.experiment import INCONCLUSIVE
from servelab.core.case.record import CaseEvent, CaseEvidence
from servelab.core.investigate.slow import (
    REPRODUCE_LABEL,
    REPRODUCE_SEED_OFFSET,
    BaselineSearch,
    Slowdown,
    SmallBaseline,
    compare_to_baseline,
    run_value,
    search_baseline,
)
from servelab.core.investigate.state import Decided, SuspectChange
from servelab.core.ledger.codec import decode, encode
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.ops.ab.ab import run_ab
from servelab.ops.ab.config import AbConfig
from servelab.ops.bench.bench import run_bench
from servelab.ops.bench.recorded import recorded_trace
from servelab.ops.case.case import add_evidence
from servelab.ops.context import Operation
from servelab.ops.investigate.steps import spec_targets

__all__ = ["SlowReproduction", "baseline_bench", "check_baseline", "reproduce_slow", "slow_test"]

#: What to do when the baseline's trace, recorded as a relative path, is not found here.
TRACE_HINT = (
    "run investigate from the directory that bench ran in, or record a new baseline "
    "(`servelab bench --trace FILE`, recorded by its absolute path) when the deployment is good"
)


@dataclass(frozen=True)
class SlowReproduction:
    """The comparison with the baseline (None: no usable baseline recorded), the runs it made,
    and the recorded benches too small to compare with (passed over, or all there was)."""

    slowdown: Slowdown | None
    run_ids: tuple[int, ...] = ()
    skipped: tuple[SmallBaseline, ...] = ()


def _bench_of(run: BenchRunRecord, levels: tuple[int, ...], runs: int) -> BenchConfig:
    """The baseline's workload at its ``levels`` with ``runs`` runs per level (at least two)
    and other prompts."""
    bench = recorded_trace(decode(BenchConfig, run.config), "bench", TRACE_HINT)
    return dataclasses.replace(bench, label=REPRODUCE_LABEL, repeat=max(2, runs),
                               concurrencies=levels or bench.concurrencies,
                               seed=bench.seed + REPRODUCE_SEED_OFFSET)  # fmt: skip


def baseline_bench(ledger: Ledger, slowdown: Slowdown) -> BenchConfig:
    """The workload the baseline ran (read back from its first run), as the reproduction runs
    it."""
    run = ledger.get(BenchRunRecord, slowdown.baseline_ids[0], whole=False)
    assert run is not None, slowdown.baseline_ids
    runs = max((p.n_baseline for p in slowdown.points), default=2)
    return _bench_of(run, tuple(p.concurrency for p in slowdown.points), runs)


def _baseline(op: Operation, ledger: Ledger) -> BaselineSearch:
    targets = spec_targets(op)
    urls = [u for u in (targets.entry_url, targets.router_url) if u is not None]
    return search_baseline(ledger.list(BenchRunRecord), urls, ledger.list(AbRunRecord))


def check_baseline(op: Operation, ledger: Ledger) -> None:
    """Before a case is opened: the baseline's rows read and its workload (its trace) can run
    here (a :class:`~servelab.errors.DamagedRow`, a trace not found: raised)."""
    found = _baseline(op, ledger).found
    if found is not None:
        _bench_of(found[1], (), 2)


async def reproduce_slow(op: Operation, ledger: Ledger, case_id: int) -> SlowReproduction:
    """The baseline's bench run again, recorded and attached to the case, and compared."""
    search = _baseline(op, ledger)
    if search.found is None:
        return SlowReproduction(None, skipped=search.skipped)
    baseline, newest = search.found
    bench = _bench_of(newest, tuple(baseline.throughput), baseline.runs)
    result = await run_bench(bench, ledger=ledger)
    now: dict[int, list[float]] = {}
    for run in result.runs:
        if not run.interrupted:
            now.setdefault(run.concurrency, []).append(run_value(run.metrics))
    ids = tuple(r.run_id for r in result.runs if r.run_id is not None)
    for run_id in ids:
        add_evidence(ledger, case_id, "run", run_id, "investigate: reproduce (slow)")
    return SlowReproduction(compare_to_baseline(baseline, now), ids)


async def slow_test(
    op: Operation, ledger: Ledger, case_id: int, suspect: SuspectChange, bench: BenchConfig,
    rounds: int, restore: float,
) -> Decided:  # fmt: skip
    """An A/B of ``suspect``'s suspected value (baseline arm) against its good value (the
    revert), the knob put back as found after; its verdict, recorded on the case."""
    if suspect.suspected is None or suspect.good is None:
        return Decided(suspect.target, INCONCLUSIVE, "ab")  # an unset value has no arm
    cfg = AbConfig(suspect.service, suspect.knob, suspect.suspected, suspect.good,
                   dataclasses.replace(bench, repeat=1, label=""), repeat=rounds)  # fmt: skip
    result = await run_ab(op, cfg, ledger=ledger)
    outcome, points = judge_slow(result.comparisons, restore)
    record = AbTestRecord(case_id, suspect.target, suspect.suspected, suspect.good, result.ab_id,
                          round(restore, 4), points, outcome)  # fmt: skip
    event_id = ledger.add(
        CaseEvent(at=NOW, case_id=case_id, kind=AbTestRecord.KIND, detail=encode(record))
    )
    note = f"ab test {suspect.target}: {outcome} (A/B #{result.ab_id})"
    evidence_id = ledger.add(CaseEvidence(at=NOW, case_id=case_id, kind=AbTestRecord.KIND,
                                          ref_id=event_id, note=note))  # fmt: skip
    return Decided(suspect.target, outcome, "ab", event_id, evidence_id)
