"""The load generator: closed loop at fixed concurrency, or open loop at a rate (no printing).

Latency is measured from each request's SCHEDULED send time (closed loop: the instant its slot
freed; open loop: t0 + its Poisson offset), so time spent waiting for a slot is never hidden; the
dispatch delay (actual − scheduled) is reported separately. The client watches itself: event-loop
lag (a ticker task), CPU seconds (``time.process_time``) per output token, and a ``client_bound``
flag judged by :func:`servelab.core.load.clienthealth.client_health`.

Bodies are captured as stamped reads during a run and decoded right after it (the decode's CPU
is counted in the client's CPU per token), so no parsing competes with reading while streams are
live. ``run_bench(config, progress=..., ledger=..., save=..., stop=...)`` runs every concurrency ×
repeat; after EVERY run (partial runs included) it records the run in the ledger (the one path the
CLI's bench and the A/B share) and then calls ``save(run)``; it stops cleanly when ``stop`` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import secrets
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from time import perf_counter_ns
from typing import Any

from servelab.core.load import metrics as m
from servelab.core.load.clienthealth import ClientHealth, client_health
from servelab.core.load.records import RequestRecord, record_to_dict
from servelab.core.load.workload import (
    LengthDist,
    closed_loop_ramp_ns,
    poisson_offsets_ns,
)
from servelab.core.stats import Interval, Summary, summarize, t_interval
from servelab.core.telemetry.rules import run_evidence
from servelab.core.telemetry.summary import RunTelemetry
from servelab.core.telemetry.traces import RunTraces, TraceSummary, summarize_traces
from servelab.io.http.client import StreamClient
from servelab.io.ledger.ledger import Ledger
from servelab.ops.bench.load import (
    Job,
    Part,
    PartResult,
    jobs_for,
    merge,
    run_part,
    slot_starts_ns,
    split,
)
from servelab.ops.bench.workers import ClientSpec, Workers, shared_t0
from servelab.ops.telemetry.tracing import TraceCollector
from servelab.ops.telemetry.watch import MetricsPlan, MetricsWatch

__all__ = [
    "BenchConfig",
    "BenchProgress",
    "BenchResult",
    "LevelSummary",
    "RunResult",
    "record_run",
    "result_so_far",
    "run_bench",
    "run_payload",
    "summarize_level",
]


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """What to run. ``requests`` is per run, warm-up excluded; ``rate`` switches to open loop
    (Poisson) with the concurrency as the in-flight cap."""

    url: str
    concurrencies: tuple[int, ...] = (1,)
    requests: int = 100
    input_len: LengthDist = field(default_factory=lambda: LengthDist("fixed", 128))
    output_len: LengthDist = field(default_factory=lambda: LengthDist("fixed", 64))
    repeat: int = 1
    rate: float | None = None
    warmup: int = 0
    idle_timeout_s: float = 60.0
    deadline_s: float | None = None
    seed: int = 0
    model: str = "default"
    label: str = ""
    endpoint: str = "/v1/chat/completions"
    slo: m.SLO | None = None
    shared_prefix_len: int = 0
    ignore_eos: bool = True
    #: Closed loop: slot i sends its first request ``i * ramp_s / concurrency`` after the start, so
    #: the users do not move in lockstep. None: the median E2E of this level's warm-up requests.
    ramp_s: float | None = None
    #: Client processes sharing the users (``bench --workers``), at most one per user.
    workers: int = 1
    #: Request headers every request carries (``bench --header NAME:VALUE``).
    headers: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.concurrencies or min(self.concurrencies) < 1:
            raise ValueError("concurrency values must be positive")
        if self.requests < 1 or self.repeat < 1 or self.warmup < 0:
            raise ValueError("requests and repeat must be ≥ 1, warmup ≥ 0")
        if self.rate is not None and self.rate <= 0:
            raise ValueError("rate must be positive")
        if self.workers < 1:
            raise ValueError("workers must be ≥ 1")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the configuration."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class BenchProgress:
    """One progress report: ``phase`` is "warmup", "run" or "done".

    In a "run" event ``done`` counts the requests that ended (not those sent), so it reaches
    ``total`` once per run, whatever the concurrency.
    """

    phase: str
    concurrency: int
    repeat_index: int
    done: int
    total: int


@dataclass(slots=True)
class RunResult:
    """One run at one concurrency: its records (warm-up excluded), metrics and client health."""

    concurrency: int
    repeat_index: int
    records: list[RequestRecord]
    metrics: m.RunMetrics
    client: ClientHealth
    interrupted: bool = False
    deadline_hit: bool = False
    run_id: int | None = None  # its ledger row, once recorded
    #: Connection set-up times (ns) of the connect phase before the run and of any connection
    #: opened during it: set-up is its own phase, never inside a TTFT.
    setup_ns: list[int] = field(default_factory=list)
    workers: int = 1
    #: what the router and the engines counted over the run (None: not watched)
    telemetry: RunTelemetry | None = None
    #: its requests joined to their server spans (None: tracing off)
    traces: RunTraces | None = None


@dataclass(frozen=True, slots=True)
class LevelSummary:
    """Everything measured at one concurrency, pooled over its repeats (all times in ms)."""

    concurrency: int
    n_runs: int
    n_requests: int
    n_ok: int
    failures: dict[str, int]
    throughput: Summary
    throughput_ci: Interval
    steady_throughput: Summary
    request_throughput: Summary
    goodput: float | None
    ttft_ms: Summary
    itl_ms: Summary
    gap_ms: Summary
    tpot_ms: Summary
    e2e_ms: Summary
    dispatch_ms: Summary
    output_tokens_usage: bool
    cpu_ms_per_token: float | None
    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    client_bound: bool
    client_reasons: tuple[str, ...]
    connect_ms: Summary
    workers: int
    #: where the TTFT went, per phase, over the repeats' traced requests (None: tracing off)
    traces: TraceSummary | None = None


@dataclass(slots=True)
class BenchResult:
    """All runs and their per-concurrency summaries."""

    config: BenchConfig
    runs: list[RunResult] = field(default_factory=list)
    levels: list[LevelSummary] = field(default_factory=list)
    interrupted: bool = False

    @property
    def n_failed(self) -> int:
        """Failed requests over every run."""
        return sum(r.metrics.n_failed for r in self.runs)


def _ms(values: Sequence[float]) -> Summary:
    return summarize([v / 1e6 for v in values])


def summarize_level(concurrency: int, runs: Sequence[RunResult]) -> LevelSummary:
    """Pool the runs at one concurrency: per-request distributions, throughput across runs."""
    records = [r for run in runs for r in run.records]
    ok = [r for r in records if r.ok]
    tput = [run.metrics.output_throughput for run in runs]
    goodputs = [run.metrics.goodput for run in runs if run.metrics.goodput is not None]
    cpu = [run.client.cpu_ms_per_token for run in runs if run.client.cpu_ms_per_token is not None]
    reasons = tuple(sorted({x for run in runs for x in run.client.reasons}))
    return LevelSummary(
        concurrency=concurrency,
        n_runs=len(runs),
        n_requests=len(records),
        n_ok=len(ok),
        failures=m.failures_by_reason(records),
        throughput=summarize(tput),
        throughput_ci=t_interval(tput),
        steady_throughput=summarize(
            [x for run in runs if (x := run.metrics.steady_throughput) is not None]
        ),
        request_throughput=summarize([run.metrics.request_throughput for run in runs]),
        goodput=sum(goodputs) / len(goodputs) if goodputs else None,
        ttft_ms=_ms([x for r in ok if (x := m.ttft_ns(r)) is not None]),
        itl_ms=_ms([y for r in ok if (y := m.itl_ns(r)) is not None]),
        gap_ms=_ms([g for r in ok for g in m.gaps_ns(r)]),
        tpot_ms=_ms([z for r in ok if (z := m.tpot_ns(r)) is not None]),
        e2e_ms=_ms([x for r in ok if (x := m.e2e_ns(r)) is not None]),
        dispatch_ms=_ms([m.dispatch_delay_ns(r) for r in records if r.sent_ns]),
        output_tokens_usage=bool(ok) and all(r.tokens_from_usage for r in ok),
        cpu_ms_per_token=sum(cpu) / len(cpu) if cpu else None,
        loop_lag_p99_ms=max(run.client.loop_lag_p99_ms for run in runs),
        loop_lag_max_ms=max(run.client.loop_lag_max_ms for run in runs),
        client_bound=bool(reasons),
        client_reasons=reasons,
        connect_ms=_ms([x for run in runs for x in run.setup_ns]),
        workers=max(run.workers for run in runs),
        traces=_level_traces(runs),
    )


def _level_traces(runs: Sequence[RunResult]) -> TraceSummary | None:
    joined = [run.traces for run in runs if run.traces is not None]
    if not joined:
        return None
    breakdowns = [b for t in joined for b in t.breakdowns]
    return summarize_traces(breakdowns, len(breakdowns) + sum(len(t.untraced) for t in joined))


def run_payload(run: RunResult) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(summary, records)`` of one run as JSON-ready data, for the ledger's writer."""
    summary = {
        "concurrency": run.concurrency,
        "repeat_index": run.repeat_index,
        "interrupted": run.interrupted,
        "deadline_hit": run.deadline_hit,
        "metrics": asdict(run.metrics),
        "client": asdict(run.client),
        "failures": m.failures_by_reason(run.records),
        "level": asdict(summarize_level(run.concurrency, [run])),
    }
    if run.telemetry is not None:
        summary["telemetry"] = run.telemetry.to_json()
        evidence = run_evidence(run.telemetry, run.records)
        summary["telemetry_evidence"] = [e.to_json() for e in evidence]
    if run.traces is not None:
        summary["traces"] = run.traces.to_json()
    return summary, [record_to_dict(r) for r in run.records]


def record_run(ledger: Ledger, config: BenchConfig, run: RunResult) -> int:
    """Record one run (config, summary, every per-request record, its received spans) in the
    ledger; its row id."""
    summary, records = run_payload(run)
    run.run_id = ledger.record_bench_run(
        label=config.label or None, config=config.to_dict(), summary=summary, records=records,
        spans=() if run.traces is None else run.traces.spans,
    )  # fmt: skip
    return run.run_id


def result_so_far(
    config: BenchConfig, runs: Sequence[RunResult], *, interrupted: bool = False
) -> BenchResult:
    """The :class:`BenchResult` of the runs done so far (levels summarized in sweep order)."""
    levels = []
    for concurrency in config.concurrencies:
        at = [r for r in runs if r.concurrency == concurrency]
        if at:
            levels.append(summarize_level(concurrency, at))
    return BenchResult(config, list(runs), levels, interrupted)


BenchProgressFn = Callable[[BenchProgress], None]
SaveFn = Callable[[RunResult], None]


class _Local:
    """One process: the run's part on this loop's client."""

    def __init__(self, client: StreamClient) -> None:
        self.client = client

    async def connect(self) -> list[int]:
        return await self.client.connect(self.client.concurrency)

    async def run(
        self, part: Part, stop: asyncio.Event | None, on_done: Callable[[RequestRecord], None]
    ) -> PartResult:
        return await run_part(self.client, part, stop, on_done)


class _Spread:
    """N worker processes: the run's part split N ways on one t0, merged back."""

    def __init__(self, workers: Workers) -> None:
        self.workers = workers

    async def connect(self) -> list[int]:
        return await self.workers.connect()

    async def run(
        self, part: Part, stop: asyncio.Event | None, _on_done: Callable[[RequestRecord], None]
    ) -> PartResult:
        return merge(await self.workers.run(split(part, self.workers.n), stop))


_Driver = _Local | _Spread


@dataclass(slots=True)
class _Bench:
    """The state of one ``run_bench`` call: where results go, and how it is stopped."""

    config: BenchConfig
    progress: BenchProgressFn
    ledger: Ledger | None
    save: SaveFn | None
    stop: asyncio.Event | None
    result: BenchResult
    ramp_ns: int = 0
    metrics: MetricsPlan | None = None
    traces: TraceCollector | None = None

    async def level(self, concurrency: int) -> None:
        """Connections, warm-up, then every repeat at one concurrency; summarise what ran."""
        config, runs = self.config, []
        self.ramp_ns = closed_loop_ramp_ns(config.ramp_s, [])
        workers = min(config.workers, concurrency)
        async with contextlib.AsyncExitStack() as stack:
            if workers > 1:
                spec = ClientSpec(config.url, concurrency, config.idle_timeout_s, config.headers)
                pool = await stack.enter_async_context(Workers(workers, spec))
                driver: _Driver = _Spread(pool)
                setups = await pool.open()
            else:
                client = StreamClient(
                    config.url, concurrency=concurrency, idle_timeout_s=config.idle_timeout_s,
                    headers=dict(config.headers),
                )  # fmt: skip
                driver = _Local(await stack.enter_async_context(client))
                setups = await driver.connect()
            if config.warmup:
                await self._warmup(driver, concurrency)
            for k in range(config.repeat):
                if self.result.interrupted:
                    break
                run = await self._watched(driver, concurrency, k, setups + await driver.connect())
                setups = []
                runs.append(run)
                self.result.runs.append(run)
                self.result.interrupted = run.interrupted
                if self.ledger is not None:
                    record_run(self.ledger, config, run)
                if self.save is not None:
                    self.save(run)
        if runs:
            self.result.levels.append(summarize_level(concurrency, runs))

    async def _watched(
        self, driver: _Driver, concurrency: int, k: int, setups: list[int]
    ) -> RunResult:
        """One run, with the deployment's metrics watched around it when there is a plan, and
        its requests joined to their spans when tracing is on."""
        anchor = TraceCollector.anchor()
        if self.metrics is None:
            run = await self._run(driver, concurrency, k, setups)
        else:
            watch = MetricsWatch(self.metrics.sources, prometheus=self.metrics.prometheus)
            async with watch:
                run = await self._run(driver, concurrency, k, setups)
            run.telemetry = watch.result
        if self.traces is not None:
            run.traces = await self.traces.collect(run.records, anchor)
        return run

    def _jobs(self, n: int, seed: int) -> list[Job]:
        c = self.config
        return jobs_for(
            n,
            seed,
            input_len=c.input_len,
            output_len=c.output_len,
            shared_prefix_len=c.shared_prefix_len,
            model=c.model,
            endpoint=c.endpoint,
            ignore_eos=c.ignore_eos,
        )

    def _t0(self, driver: _Driver) -> int | None:
        """Worker processes share a t0 a moment ahead (each prepares its share's requests
        before it); one process starts the part when it has prepared them (None): a t0 taken
        before that would count the preparing in the first round's dispatch delay."""
        return shared_t0() if isinstance(driver, _Spread) else None

    async def _warmup(self, driver: _Driver, concurrency: int) -> None:
        jobs = self._jobs(self.config.warmup, self.config.seed + 999_983)
        self.progress(BenchProgress("warmup", concurrency, 0, 0, len(jobs)))
        starts = tuple(slot_starts_ns(min(concurrency, len(jobs)), 0))
        part = Part(
            jobs,
            self.config.endpoint,
            starts,
            t0_ns=self._t0(driver),
            warmup=True,
            trace_tag=secrets.token_hex(8),
        )
        warm = await driver.run(part, self.stop, lambda _r: None)
        self.result.interrupted = warm.stopped
        self.ramp_ns = closed_loop_ramp_ns(self.config.ramp_s, warm.records)

    async def _run(self, driver: _Driver, concurrency: int, k: int, setups: list[int]) -> RunResult:
        gc.collect()
        gc.freeze()  # objects alive now are never rescanned: no long gen-2 pauses mid-run
        try:
            return await self._measure(driver, concurrency, k, setups)
        finally:
            gc.unfreeze()

    def _part(self, jobs: list[Job], concurrency: int, seed: int, t0: int | None) -> Part:
        config = self.config
        start = perf_counter_ns() if t0 is None else t0
        deadline = None if config.deadline_s is None else start + round(config.deadline_s * 1e9)
        tag = secrets.token_hex(8)  # every request's x-request-id and traceparent
        if config.rate is None:
            starts = tuple(slot_starts_ns(concurrency, self.ramp_ns))
            return Part(
                jobs, config.endpoint, starts, t0_ns=t0, deadline_ns=deadline, trace_tag=tag
            )
        offsets = tuple(poisson_offsets_ns(len(jobs), config.rate, seed=seed))
        return Part(
            jobs,
            config.endpoint,
            offsets_ns=offsets,
            cap=concurrency,
            t0_ns=t0,
            deadline_ns=deadline,
            trace_tag=tag,
        )

    async def _measure(
        self, driver: _Driver, concurrency: int, k: int, setups: list[int]
    ) -> RunResult:
        config, total = self.config, self.config.requests
        finished = 0

        def on_done(_record: RequestRecord) -> None:
            nonlocal finished
            finished += 1
            self.progress(BenchProgress("run", concurrency, k, finished, total))

        seed = config.seed + 1000 * k + concurrency
        part = self._part(self._jobs(total, seed), concurrency, seed, self._t0(driver))
        got = await driver.run(part, self.stop, on_done)
        if isinstance(driver, _Spread):
            self.progress(BenchProgress("run", concurrency, k, len(got.records), total))
        records = got.records
        return RunResult(
            concurrency=concurrency,
            repeat_index=k,
            records=records,
            metrics=m.run_metrics(
                records, slo=config.slo, concurrency=concurrency if config.rate is None else None
            ),
            client=client_health(records, got.cpu_s, got.wall_s, got.lag_s, got.run_cpu_s),
            interrupted=got.stopped,
            deadline_hit=len(records) < total or any(r.error == "run deadline" for r in records),
            setup_ns=setups + got.setups_ns,
            workers=driver.workers.n if isinstance(driver, _Spread) else 1,
        )


async def run_bench(
    config: BenchConfig,
    *,
    progress: BenchProgressFn | None = None,
    ledger: Ledger | None = None,
    save: SaveFn | None = None,
    stop: asyncio.Event | None = None,
    metrics: MetricsPlan | None = None,
    traces: TraceCollector | None = None,
) -> BenchResult:
    """Run every concurrency × repeat; after each run, record it in ``ledger`` (its ``run_id``
    set) and call ``save(run)``; stop early when ``stop`` is set.

    Callable programmatically: ``await run_bench(BenchConfig(url=..., concurrencies=(64, 96),
    requests=200))``. Cancellation (``stop``) ends the current run, which is returned, recorded
    and saved with ``interrupted=True``. With ``metrics``, every run is watched
    (:class:`~servelab.ops.telemetry.watch.MetricsWatch`) and keeps what the servers counted. With
    ``traces`` (not yet entered), its receiver listens for the whole sweep and every run's
    requests are joined to their spans (``run.traces``).
    """
    report = progress or (lambda _p: None)
    bench = _Bench(config, report, ledger, save, stop, BenchResult(config), metrics=metrics)
    async with contextlib.AsyncExitStack() as stack:
        if traces is not None:
            bench.traces = await stack.enter_async_context(traces)
        for concurrency in config.concurrencies:
            await bench.level(concurrency)
            if bench.result.interrupted:
                break
    report(
        BenchProgress(
            "done", 0, 0, len(bench.result.runs), len(config.concurrencies) * config.repeat
        )
    )
    return bench.result
