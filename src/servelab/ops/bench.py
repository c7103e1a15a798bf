"""The load generator: closed loop at fixed concurrency, or open loop at a rate (no printing).

Latency is measured from each request's SCHEDULED send time (closed loop: the instant its slot
freed; open loop: t0 + its Poisson offset), so time spent waiting for a slot is never hidden; the
dispatch delay (actual − scheduled) is reported separately. The client watches itself: event-loop
lag (a ticker task), CPU seconds (``time.process_time``) per output token, and a ``client_bound``
flag judged by :func:`servelab.core.clienthealth.client_health`.

Bodies are captured as stamped reads during a run and decoded right after it (the decode's CPU
is counted in the client's CPU per token), so no parsing competes with reading while streams are
live. ``run_bench(config, progress=..., ledger=..., save=..., stop=...)`` runs every concurrency ×
repeat; after EVERY run (partial runs included) it records the run in the ledger (the one path the
CLI's bench and the A/B share) and then calls ``save(run)``; it stops cleanly when ``stop`` is set.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from time import perf_counter_ns
from typing import Any

from servelab.core import metrics as m
from servelab.core.clienthealth import ClientHealth, client_health
from servelab.core.records import RequestRecord, decode_chunks, record_to_dict
from servelab.core.stats import Interval, Summary, summarize, t_interval
from servelab.core.workload import (
    LengthDist,
    closed_loop_ramp_ns,
    generate_requests,
    poisson_offsets_ns,
)
from servelab.io.http import Chunks, StreamClient, chat_body, completion_body
from servelab.io.ledger import Ledger

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

#: How often the event-loop lag ticker samples (its thresholds: :mod:`servelab.core.clienthealth`).
LAG_TICK_S = 0.02


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

    def __post_init__(self) -> None:
        if not self.concurrencies or min(self.concurrencies) < 1:
            raise ValueError("concurrency values must be positive")
        if self.requests < 1 or self.repeat < 1 or self.warmup < 0:
            raise ValueError("requests and repeat must be ≥ 1, warmup ≥ 0")
        if self.rate is not None and self.rate <= 0:
            raise ValueError("rate must be positive")

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
    )


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
    return summary, [record_to_dict(r) for r in run.records]


def record_run(ledger: Ledger, config: BenchConfig, run: RunResult) -> int:
    """Record one run (config, summary, every per-request record) in the ledger; its row id."""
    summary, records = run_payload(run)
    run.run_id = ledger.record_bench_run(
        label=config.label or None, config=config.to_dict(), summary=summary, records=records
    )
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


async def _lag_ticker(samples: list[float]) -> None:
    loop = asyncio.get_running_loop()
    due = loop.time() + LAG_TICK_S
    while True:
        await asyncio.sleep(max(due - loop.time(), 0.0))
        now = loop.time()
        samples.append(max(now - due, 0.0))
        due = now + LAG_TICK_S


@dataclass(frozen=True, slots=True)
class _Job:
    index: int
    input_len: int
    body: bytes


def _jobs(config: BenchConfig, n: int, seed: int) -> list[_Job]:
    specs = generate_requests(
        n,
        input_len=config.input_len,
        output_len=config.output_len,
        seed=seed,
        shared_prefix_len=config.shared_prefix_len,
    )
    chat = "chat" in config.endpoint
    make = chat_body if chat else completion_body
    eos = config.ignore_eos
    return [
        _Job(s.index, s.input_len, make(config.model, s.prompt, s.output_len, ignore_eos=eos))
        for s in specs
    ]


class _Load:
    """One run's moving parts: the client, the jobs, the deadline, the records."""

    def __init__(
        self,
        client: StreamClient,
        endpoint: str,
        on_done: Callable[[RequestRecord], None],
        deadline_ns: int | None,
    ) -> None:
        self.client = client
        self.endpoint = endpoint
        self.on_done = on_done
        self.deadline_ns = deadline_ns
        self.records: list[RequestRecord] = []  # every request sent (appended at its send)
        self.finished = 0  # requests that ended (what progress reports: it reaches the total once)
        self._captured: list[tuple[RequestRecord, Chunks]] = []

    def decode(self) -> None:
        """Decode every captured body (after the run: no decoding competes with reading)."""
        for record, chunks in self._captured:
            decode_chunks(record, chunks, record.end_ns or perf_counter_ns())
        self._captured = []

    def _late(self) -> bool:
        return self.deadline_ns is not None and perf_counter_ns() >= self.deadline_ns

    async def _send(self, job: _Job, scheduled_ns: int, warmup: bool) -> RequestRecord:
        record = RequestRecord(job.index, scheduled_ns, input_tokens=job.input_len, warmup=warmup)
        self.records.append(record)
        chunks: Chunks = []
        self._captured.append((record, chunks))
        await self.client.stream(
            self.endpoint, job.body, record, deadline_ns=self.deadline_ns, raw=chunks
        )
        self.finished += 1
        self.on_done(record)
        return record

    async def closed(
        self, jobs: list[_Job], concurrency: int, warmup: bool = False, ramp_ns: int = 0
    ) -> None:
        """Each of ``concurrency`` slots sends its next job the instant its previous one ends;
        slot i starts ``i * ramp_ns / concurrency`` after t0 (its first scheduled send)."""
        queue: Iterator[_Job] = iter(jobs)
        t0 = perf_counter_ns()

        async def slot(i: int) -> None:
            scheduled = t0 + i * ramp_ns // concurrency
            delay = (scheduled - perf_counter_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            for job in queue:
                if self._late():
                    return
                record = await self._send(job, scheduled, warmup)
                scheduled = record.end_ns or perf_counter_ns()

        await asyncio.gather(*(slot(i) for i in range(concurrency)))

    async def open(self, jobs: list[_Job], concurrency: int, offsets: list[int]) -> None:
        """Send job i at t0 + offsets[i]; at most ``concurrency`` in flight (the wait for a
        slot is dispatch delay, inside the measured latency)."""
        gate = asyncio.Semaphore(concurrency)
        tasks: list[asyncio.Task[None]] = []
        t0 = perf_counter_ns()

        async def one(job: _Job, scheduled: int) -> None:
            async with gate:
                await self._send(job, scheduled, False)

        try:
            for job, offset in zip(jobs, offsets, strict=True):
                wait = (t0 + offset - perf_counter_ns()) / 1e9
                if wait > 0:
                    await asyncio.sleep(wait)
                if self._late():
                    break
                tasks.append(asyncio.create_task(one(job, t0 + offset)))
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


BenchProgressFn = Callable[[BenchProgress], None]
SaveFn = Callable[[RunResult], None]


async def _until_stopped(work: asyncio.Task[None], stop: asyncio.Event | None) -> bool:
    """Await ``work``; if ``stop`` is set first, cancel it. True when stopped."""
    if stop is None:
        await work
        return False
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if work.done():
        work.result()
        return False
    work.cancel()
    await asyncio.gather(work, return_exceptions=True)
    return True


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

    async def level(self, concurrency: int) -> None:
        """Warm-up, then every repeat at one concurrency; summarise what ran."""
        config, runs = self.config, []
        self.ramp_ns = closed_loop_ramp_ns(config.ramp_s, [])
        async with StreamClient(
            config.url, concurrency=concurrency, idle_timeout_s=config.idle_timeout_s
        ) as client:
            if config.warmup:
                warm = asyncio.create_task(self._warmup(client, concurrency))
                self.result.interrupted = await _until_stopped(warm, self.stop)
            for k in range(config.repeat):
                if self.result.interrupted:
                    break
                run = await self._run(client, concurrency, k)
                runs.append(run)
                self.result.runs.append(run)
                self.result.interrupted = run.interrupted
                if self.ledger is not None:
                    record_run(self.ledger, config, run)
                if self.save is not None:
                    self.save(run)
        if runs:
            self.result.levels.append(summarize_level(concurrency, runs))

    async def _warmup(self, client: StreamClient, concurrency: int) -> None:
        jobs = _jobs(self.config, self.config.warmup, self.config.seed + 999_983)
        load = _Load(client, self.config.endpoint, lambda _r: None, None)
        self.progress(BenchProgress("warmup", concurrency, 0, 0, len(jobs)))
        await load.closed(jobs, min(concurrency, len(jobs)), warmup=True)
        self.ramp_ns = closed_loop_ramp_ns(self.config.ramp_s, load.records)

    async def _run(self, client: StreamClient, concurrency: int, k: int) -> RunResult:
        gc.collect()
        gc.freeze()  # objects alive now are never rescanned: no long gen-2 pauses mid-run
        try:
            return await self._measure(client, concurrency, k)
        finally:
            gc.unfreeze()

    def _start(
        self, load: _Load, jobs: list[_Job], concurrency: int, seed: int
    ) -> asyncio.Task[None]:
        if self.config.rate is None:
            return asyncio.create_task(load.closed(jobs, concurrency, ramp_ns=self.ramp_ns))
        offsets = poisson_offsets_ns(len(jobs), self.config.rate, seed=seed)
        return asyncio.create_task(load.open(jobs, concurrency, offsets))

    async def _measure(self, client: StreamClient, concurrency: int, k: int) -> RunResult:
        config = self.config
        total = config.requests

        def on_done(_record: RequestRecord) -> None:
            self.progress(BenchProgress("run", concurrency, k, load.finished, total))

        deadline = None
        if config.deadline_s is not None:
            deadline = perf_counter_ns() + round(config.deadline_s * 1e9)
        load = _Load(client, config.endpoint, on_done, deadline)
        seed = config.seed + 1000 * k + concurrency
        jobs = _jobs(config, total, seed)
        lag: list[float] = []
        ticker = asyncio.create_task(_lag_ticker(lag))
        cpu0, wall0 = time.process_time(), perf_counter_ns()
        work = self._start(load, jobs, concurrency, seed)
        try:
            stopped = await _until_stopped(work, self.stop)
        finally:
            ticker.cancel()
        wall, run_cpu = (perf_counter_ns() - wall0) / 1e9, time.process_time() - cpu0
        load.decode()  # its CPU counts: client CPU per token includes decoding
        cpu = time.process_time() - cpu0
        records = load.records
        return RunResult(
            concurrency=concurrency,
            repeat_index=k,
            records=records,
            metrics=m.run_metrics(
                records, slo=config.slo, concurrency=concurrency if config.rate is None else None
            ),
            client=client_health(records, cpu, wall, lag, run_cpu),
            interrupted=stopped,
            deadline_hit=len(records) < total or any(r.error == "run deadline" for r in records),
        )


async def run_bench(
    config: BenchConfig,
    *,
    progress: BenchProgressFn | None = None,
    ledger: Ledger | None = None,
    save: SaveFn | None = None,
    stop: asyncio.Event | None = None,
) -> BenchResult:
    """Run every concurrency × repeat; after each run, record it in ``ledger`` (its ``run_id``
    set) and call ``save(run)``; stop early when ``stop`` is set.

    Callable programmatically: ``await run_bench(BenchConfig(url=..., concurrencies=(64, 96),
    requests=200))``. Cancellation (``stop``) ends the current run, which is returned, recorded
    and saved with ``interrupted=True``.
    """
    report = progress or (lambda _p: None)
    bench = _Bench(config, report, ledger, save, stop, BenchResult(config))
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
