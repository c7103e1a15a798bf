"""The load generator: closed loop at fixed concurrency, open loop at a rate, or a recorded trace
replayed at its instants (no printing).

Latency is measured from each request's SCHEDULED send time (closed loop: the instant its slot
freed; open loop: t0 + its Poisson offset; a trace: t0 + its recorded offset, a conversation's
later turn its recorded delay after the previous answer), so time spent waiting for a slot is
never hidden; the dispatch delay (actual − scheduled) is reported separately. The client watches
itself: event-loop lag (a ticker task), CPU seconds (``time.process_time``) per output token, and a
``client_bound`` flag judged by :func:`servelab.core.load.clienthealth.client_health`.

Bodies are captured as stamped reads during a run and decoded right after it (the decode's CPU
is counted in the client's CPU per token), so no parsing competes with reading while streams are
live; a trace's are decoded as each request ends, so a long trace keeps records, not reads.
``run_bench(config, progress=..., ledger=..., save=..., stop=...)`` runs every concurrency ×
repeat; after EVERY run (partial runs included) it records the run in the ledger (the one path the
CLI's bench and the A/B share) and then calls ``save(run)``; it stops cleanly when ``stop`` is set.
Its config, results and events are :mod:`servelab.core.bench.contract`'s types.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from time import perf_counter_ns

from servelab.core.answers.answer import Answer
from servelab.core.answers.contract import AnswerReferences, State, summarize_arm
from servelab.core.answers.judge import check_visit
from servelab.core.answers.probes import probe_set
from servelab.core.bench.contract import (
    TRACE_CONNECT_AHEAD,
    TRACE_IN_FLIGHT,
    BenchConfig,
    BenchProgress,
    BenchProgressFn,
    BenchResult,
    LevelSummary,
    RunResult,
    SaveFn,
)
from servelab.core.bench.summary import summarize_level
from servelab.core.load import metrics as m
from servelab.core.load.cache import cache_summary, session_summaries
from servelab.core.load.clienthealth import client_health
from servelab.core.load.records import FailReason, RequestRecord
from servelab.core.load.trace import TracePlan
from servelab.core.load.workload import closed_loop_ramp_ns, poisson_offsets_ns
from servelab.io.http.stream import StreamClient
from servelab.io.ledger.answers import AnswerStore
from servelab.io.ledger.ledger import Ledger
from servelab.io.tracefile import scan_trace
from servelab.ops.answers.probing import ProbePlan, plan_probes, read_probe_answers
from servelab.ops.answers.references import take_references
from servelab.ops.bench.jobs import Job, build_jobs
from servelab.ops.bench.load import slot_starts_ns
from servelab.ops.bench.part import Part, PartResult, merge, run_part, split
from servelab.ops.bench.replay import ReplayPlan, replay_of
from servelab.ops.bench.results import record_run
from servelab.ops.bench.workers import ClientSpec, Workers, shared_t0, spare_core
from servelab.ops.telemetry.tracing import TraceCollector
from servelab.ops.telemetry.watch import MetricsPlan, MetricsWatch

__all__ = ["run_bench"]


class _Local:
    """One process: the run's part on this loop's client."""

    def __init__(self, client: StreamClient, ahead: int) -> None:
        self.client = client
        self.ahead = ahead  # connections opened before each run

    async def connect(self) -> list[int]:
        return await self.client.connect(self.ahead)

    async def run(
        self, part: Part, stop: asyncio.Event | None, on_done: Callable[[RequestRecord], None]
    ) -> PartResult:
        part = replace(part, asleep=not spare_core(1))
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
        part = replace(part, asleep=not spare_core(self.workers.n))
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
    references: AnswerReferences | None = None

    async def level(self, concurrency: int) -> None:
        """Connections, warm-up, then every repeat at one concurrency; summarise what ran."""
        config, runs = self.config, []
        self.ramp_ns = closed_loop_ramp_ns(config.ramp_s, [])
        tracing = config.trace is not None
        workers = config.workers if tracing else min(config.workers, concurrency)
        async with contextlib.AsyncExitStack() as stack:
            slots = TRACE_IN_FLIGHT if tracing else concurrency
            # connections opened ahead: no more than a run's or warm-up's requests could use
            ahead = TRACE_CONNECT_AHEAD if tracing else min(concurrency, self._most_requests())
            if workers > 1:
                spec = ClientSpec(config.url, slots, config.idle_timeout_s, config.headers,
                                  config.proxy, ahead=ahead if tracing else None)  # fmt: skip
                pool = await stack.enter_async_context(Workers(workers, spec))
                driver: _Driver = _Spread(pool)
                setups = await pool.open()
            else:
                client = StreamClient(
                    config.url, concurrency=slots, idle_timeout_s=config.idle_timeout_s,
                    headers=dict(config.headers), proxy=config.proxy,
                )  # fmt: skip
                driver = _Local(await stack.enter_async_context(client), ahead)
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
            self.result.levels.append(
                self._answered(summarize_level(concurrency, runs, config.slo), runs)
            )

    def _answered(self, level: LevelSummary, runs: list[RunResult]) -> LevelSummary:
        """``level`` with its runs' probe answers checked against the references."""
        cfg, refs = self.config.answers, self.references
        if cfg is None or refs is None or not any(r.answers for r in runs):
            return level
        probes = probe_set(cfg.seed, cfg.probes, cfg.context_len)
        checks = [c for r in runs for c in check_visit(probes, refs, r.answers)]
        return replace(level, answers=summarize_arm(str(level.concurrency), checks,
                                                    refs.by_probe()))  # fmt: skip

    def _probes(self, total: int, concurrency: int, k: int) -> ProbePlan | None:
        """The run's answer probes (None: answers not checked, or a trace replayed)."""
        cfg = self.config
        if cfg.answers is None or not cfg.answers.on or cfg.trace is not None:
            return None
        return plan_probes(cfg.answers, cfg.model, total, concurrency, (cfg.probe_round or 0) + k)

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

    async def _jobs(self, n: int, seed: int) -> list[Job]:
        """The run's jobs, built with the stop event watched (a large run takes seconds)."""
        c = self.config
        return await build_jobs(
            n,
            seed,
            self.stop,
            input_len=c.input_len,
            output_len=c.output_len,
            shared_prefix_len=c.shared_prefix_len,
            model=c.model,
            endpoint=c.endpoint,
            ignore_eos=c.ignore_eos,
        )

    def _most_requests(self) -> int:
        """The most requests one part sends: a run's (with its probes, at most as many again)
        or the warm-up's."""
        return max(2 * self.config.requests, self.config.warmup, 1)

    def _t0(self, driver: _Driver) -> int | None:
        """Worker processes share a t0 a moment ahead (each prepares its share's requests
        before it); one process starts the part when it has prepared them (None): a t0 taken
        before that would count the preparing in the first round's dispatch delay."""
        return shared_t0() if isinstance(driver, _Spread) else None

    async def _warmup(self, driver: _Driver, concurrency: int) -> None:
        jobs = await self._jobs(self.config.warmup, self.config.seed + 999_983)
        self.progress(BenchProgress("warmup", concurrency, 0, 0, len(jobs)))
        starts = tuple(slot_starts_ns(max(min(concurrency, len(jobs)), 1), 0))
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

    def _replay(self, plan: TracePlan) -> ReplayPlan:
        """The trace's replay as data: each process builds its own (:func:`replay_of`)."""
        c = self.config
        return ReplayPlan(plan, c.seed, c.model, c.endpoint, c.ignore_eos)

    def _part(self, jobs: list[Job], concurrency: int, seed: int, t0: int | None) -> Part:
        config = self.config
        start = perf_counter_ns() if t0 is None else t0
        deadline = None if config.deadline_s is None else start + round(config.deadline_s * 1e9)
        tag = secrets.token_hex(8)  # every request's x-request-id and traceparent
        if config.trace is not None:
            plan = self._replay(config.trace)
            return Part(jobs, config.endpoint, t0_ns=t0, deadline_ns=deadline, trace_tag=tag,
                        replay=replay_of(plan), replay_plan=plan)  # fmt: skip
        if config.rate is None:
            starts = tuple(slot_starts_ns(concurrency, self.ramp_ns, len(jobs)))
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
        if (trace := config.trace) is not None:
            total = scan_trace(Path(trace.path), trace.window, trace.speedup).requests
        finished = 0

        seed = config.seed + 1000 * k + concurrency
        jobs = [] if config.trace is not None else await self._jobs(total, seed)
        probes = self._probes(total, concurrency, k)
        sent = total  # the requests progress counts: the load's and the probes'
        if probes is not None:
            jobs = probes.mix(jobs)
            sent += len(probes.jobs)

        def on_done(_record: RequestRecord) -> None:
            nonlocal finished
            finished += 1
            self.progress(BenchProgress("run", concurrency, k, finished, sent))

        part = self._part(jobs, concurrency, seed, self._t0(driver))
        if probes is not None:
            part = replace(part, keep=probes.keep)
        got = await driver.run(part, self.stop, on_done)
        if isinstance(driver, _Spread):
            self.progress(BenchProgress("run", concurrency, k, len(got.records), total))
        records = got.records
        answers: tuple[Answer, ...] = ()
        if probes is not None:
            answers = read_probe_answers(probes, records, got.bodies, concurrency)
            records = [r for r in records if r.index not in probes.probe_of]
        return RunResult(
            concurrency=concurrency,
            repeat_index=k,
            records=records,
            metrics=m.run_metrics(
                records, slo=config.slo, concurrency=concurrency if _closed(config) else None
            ),
            client=client_health(records, got.cpu_s, got.wall_s, got.lag_s, got.run_cpu_s),
            interrupted=got.stopped,
            deadline_hit=len(records) < total
            or any(r.error == FailReason.DEADLINE for r in records),
            setup_ns=setups + got.setups_ns,
            workers=driver.workers.n if isinstance(driver, _Spread) else 1,
            slo=None if config.slo is None else m.slo_attainment(records, config.slo),
            cache=cache_summary(records),
            sessions=session_summaries(records, got.names),
            answers=answers,
        )


async def bench_references(config: BenchConfig, ledger: Ledger | None) -> AnswerReferences:
    """A bench's reference answers: the target's own at low concurrency, taken before its
    levels (a bench knows no state to reuse them by: taken each time, and stored)."""
    assert config.answers is not None
    key = f"bench {secrets.token_hex(4)}"
    refs = await take_references(config.url, config.answers, model=config.model, key=key,
                                 state=State(f"url {config.url}", ()), headers=config.headers,
                                 idle_timeout_s=config.idle_timeout_s)  # fmt: skip
    return refs if ledger is None else AnswerStore(ledger).add(refs)


def _closed(config: BenchConfig) -> bool:
    """A closed loop: neither a rate nor a trace."""
    return config.rate is None and config.trace is None


async def run_bench(
    config: BenchConfig,
    *,
    progress: BenchProgressFn | None = None,
    ledger: Ledger | None = None,
    save: SaveFn | None = None,
    stop: asyncio.Event | None = None,
    metrics: MetricsPlan | None = None,
    traces: TraceCollector | None = None,
    references: AnswerReferences | None = None,
    own_references: bool = True,
) -> BenchResult:
    """Run every concurrency × repeat; after each run, record it in ``ledger`` (its ``run_id``
    set) and call ``save(run)``; stop early when ``stop`` is set.

    Callable programmatically: ``await run_bench(BenchConfig(url=..., concurrencies=(64, 96),
    requests=200))``. Cancellation (``stop``) ends the current run, which is returned, recorded
    and saved with ``interrupted=True``. With ``metrics``, every run is watched
    (:class:`~servelab.ops.telemetry.watch.MetricsWatch`) and keeps what the servers counted. With
    ``traces`` (not yet entered), its receiver listens for the whole sweep and every run's
    requests are joined to their spans (``run.traces``). With the config's answer probes, each
    run keeps its probes' answers (``run.answers``) and each level checks them against
    ``references`` (when None and ``own_references``: the target's own, taken first at low
    concurrency; not ``own_references``: an experiment judges them, the answers are kept raw).
    """
    report = progress or (lambda _p: None)
    bench = _Bench(config, report, ledger, save, stop, BenchResult(config), metrics=metrics,
                   references=references)  # fmt: skip
    if own_references and references is None and config.answers is not None and config.answers.on:
        bench.references = await bench_references(config, ledger)
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
