"""bench's summaries, computed from its runs (pure): a level pooled over its repeats, a run as the
ledger stores it, the result of the runs so far."""

from __future__ import annotations

from collections.abc import Sequence

from servelab.core.bench.contract import (
    BenchConfig,
    BenchResult,
    LevelClient,
    LevelSummary,
    RunResult,
    RunSummary,
)
from servelab.core.load import metrics as m
from servelab.core.load.cache import cache_summary
from servelab.core.load.slo import SLO
from servelab.core.stats import Summary, summarize, t_interval
from servelab.core.telemetry.rules import run_evidence
from servelab.core.telemetry.traces import TraceSummary, summarize_traces

__all__ = ["result_so_far", "run_summary", "summarize_level"]


def _ms(values: Sequence[float]) -> Summary:
    return summarize([v / 1e6 for v in values])


def _client(runs: Sequence[RunResult]) -> LevelClient:
    cpu = [run.client.cpu_ms_per_token for run in runs if run.client.cpu_ms_per_token is not None]
    reasons = tuple(sorted({x for run in runs for x in run.client.reasons}))
    return LevelClient(
        cpu_ms_per_token=sum(cpu) / len(cpu) if cpu else None,
        loop_lag_p99_ms=max(run.client.loop_lag_p99_ms for run in runs),
        loop_lag_max_ms=max(run.client.loop_lag_max_ms for run in runs),
        client_bound=bool(reasons),
        reasons=reasons,
        workers=max(run.workers for run in runs),
    )


def summarize_level(
    concurrency: int, runs: Sequence[RunResult], slo: SLO | None = None
) -> LevelSummary:
    """Pool the runs at one concurrency: per-request distributions, throughput across runs, the
    pooled requests against ``slo``."""
    records = [r for run in runs for r in run.records]
    ok = [r for r in records if r.ok]
    tput = [run.metrics.output_throughput for run in runs]
    goodputs = [run.metrics.goodput for run in runs if run.metrics.goodput is not None]
    return LevelSummary(
        concurrency=concurrency,
        n_runs=len(runs),
        n_requests=len(records),
        n_ok=len(ok),
        failures=m.failures_by_reason(r for r in records if not m.is_cut(r)),
        throughput=summarize(tput),
        throughput_ci=t_interval(tput),
        steady_throughput=summarize(
            [x for run in runs if (x := run.metrics.steady_throughput) is not None]
        ),
        request_throughput=summarize([run.metrics.request_throughput for run in runs]),
        goodput=sum(goodputs) / len(goodputs) if goodputs else None,
        output_tokens_usage=bool(ok) and all(r.tokens_from_usage for r in ok),
        client=_client(runs),
        connect_ms=_ms([x for run in runs for x in run.setup_ns]),
        ttft_ms=_ms([x for r in ok if (x := m.ttft_ns(r)) is not None]),
        itl_ms=_ms([y for r in ok if (y := m.itl_ns(r)) is not None]),
        gap_ms=_ms([g for r in ok for g in m.gaps_ns(r)]),
        tpot_ms=_ms([z for r in ok if (z := m.tpot_ns(r)) is not None]),
        e2e_ms=_ms([x for r in ok if (x := m.e2e_ns(r)) is not None]),
        dispatch_ms=_ms([m.dispatch_delay_ns(r) for r in records if r.sent_ns]),
        traces=_level_traces(runs),
        slo=None if slo is None else m.slo_attainment(records, slo),
        cache=cache_summary(records),
        usage_disagreed=sum(1 for r in records if r.usage_disagreed),
        n_cut=sum(1 for r in records if m.is_cut(r)),
    )


def _level_traces(runs: Sequence[RunResult]) -> TraceSummary | None:
    joined = [run.traces for run in runs if run.traces is not None]
    if not joined:
        return None
    breakdowns = [b for t in joined for b in t.breakdowns]
    return summarize_traces(breakdowns, len(breakdowns) + sum(len(t.untraced) for t in joined))


def run_summary(run: RunResult) -> RunSummary:
    """One run as the ledger stores it (:class:`RunSummary`)."""
    evidence = None if run.telemetry is None else run_evidence(run.telemetry, run.records)
    return RunSummary(
        concurrency=run.concurrency,
        repeat_index=run.repeat_index,
        interrupted=run.interrupted,
        deadline_hit=run.deadline_hit,
        metrics=run.metrics,
        client=run.client,
        failures=m.failures_by_reason(run.records),
        level=summarize_level(run.concurrency, [run]),
        cache=run.cache,
        slo=run.slo,
        sessions=run.sessions or None,
        telemetry=run.telemetry,
        telemetry_evidence=evidence,
        traces=run.traces,
    )


def result_so_far(
    config: BenchConfig, runs: Sequence[RunResult], *, interrupted: bool = False
) -> BenchResult:
    """The :class:`BenchResult` of the runs done so far (levels summarized in sweep order)."""
    levels = []
    for concurrency in config.concurrencies:
        at = [r for r in runs if r.concurrency == concurrency]
        if at:
            levels.append(summarize_level(concurrency, at, config.slo))
    return BenchResult(config, list(runs), levels, interrupted)
