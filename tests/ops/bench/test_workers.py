"""``bench --workers N`` against a real loopback streaming server: N spawned client processes on
one clock, records merged exactly; the split of a run's part, and the connect phase."""

from __future__ import annotations

import asyncio
import os
import statistics
from collections.abc import AsyncIterator
from time import perf_counter_ns

import pytest

from servelab.core.bench.contract import BenchConfig
from servelab.core.load import metrics
from servelab.core.load.workload import LengthDist
from servelab.ops.bench.bench import run_bench
from servelab.ops.bench.jobs import Job
from servelab.ops.bench.load import slot_starts_ns
from servelab.ops.bench.part import Part, PartResult, merge, split
from servelab.ops.bench.workers import ClientSpec, Workers, spare_core, worker_cpus
from tests.support.servers import SEEN, Seen, served, streaming_app


@pytest.fixture
async def server() -> AsyncIterator[str]:
    async with served(streaming_app(gap_s=0.01)) as url:
        yield url


def _config(url: str, **kw: object) -> BenchConfig:
    base: dict[str, object] = {
        "url": url,
        "concurrencies": (4,),
        "requests": 16,
        "input_len": LengthDist("fixed", 8),
        "output_len": LengthDist("fixed", 5),
        "model": "sim-model",
        "idle_timeout_s": 5.0,
        "ramp_s": 0.0,
    }
    return BenchConfig(**(base | kw))  # type: ignore[arg-type]


async def test_two_workers_share_one_clock_and_merge_every_record(server: str) -> None:
    start = perf_counter_ns()
    result = await run_bench(_config(server, workers=2, warmup=2, repeat=2))
    assert result.n_failed == 0 and not result.interrupted
    for run in result.runs:
        assert run.workers == 2
        assert sorted(r.index for r in run.records) == list(range(16))
        assert all(r.ok and r.output_tokens == 5 for r in run.records)
        # one clock: every stamp of every process lies after the parent's start, in order
        assert all(start < r.scheduled_ns <= r.sent_ns < (r.end_ns or 0) for r in run.records)
        assert run.client.cpu_ms_per_token is not None
    assert len(result.runs[0].setup_ns) == 4  # the connect phase: its own, 2 per worker
    assert result.runs[1].setup_ns == []  # kept alive into the next run
    level = result.levels[0]
    assert (level.client.workers, level.n_ok, level.connect_ms.n) == (2, 32, 4)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: nothing to deal")
async def test_each_worker_is_held_to_a_cpu_of_its_own(server: str) -> None:
    """Two workers on two or more CPUs run on two different ones: left to the kernel, both were
    often woken on one core, and at a trace's instant one cut the other's burst (docs/bench.md)."""
    allowed = sorted(os.sched_getaffinity(0))
    async with Workers(2, ClientSpec(server, concurrency=2, idle_timeout_s=5.0)) as workers:
        assert await workers.open()  # both answered: each opened its connection
        held = [os.sched_getaffinity(pid) for pid in workers.pids]
    assert held == [{allowed[0]}, {allowed[1]}]
    assert worker_cpus(1) == [None]  # one worker: anywhere
    assert worker_cpus(3)[2] == {allowed[2 % len(allowed)]}  # more workers than CPUs: in turn


def test_client_processes_on_every_core_wait_asleep() -> None:
    """A replay's processes spin before an instant only while a CPU is left to the server: two
    workers spinning on two cores held both at every instant (docs/bench.md)."""
    cpus = len(os.sched_getaffinity(0))
    assert not spare_core(cpus) and not spare_core(cpus + 1)
    assert spare_core(cpus - 1) == (cpus > 1)


async def test_low_concurrency_looks_the_same_in_one_or_two_processes() -> None:
    async with served(streaming_app(gap_s=0.03)) as paced:
        one = await run_bench(_config(paced, workers=1))
        two = await run_bench(_config(paced, workers=2))
    ttft = [
        statistics.median(x for r in res.runs[0].records if (x := metrics.ttft_ns(r)) is not None)
        for res in (one, two)
    ]
    gaps = [
        statistics.median(g for r in res.runs[0].records for g in metrics.gaps_ns(r))
        for res in (one, two)
    ]
    # the server's pacing (30 ms a token) shows through both alike; the bound leaves room for a
    # busy machine (the tight comparison is benchmarks/peers.py's, on a quiet one)
    assert all(g >= 25e6 for g in gaps)
    assert abs(ttft[0] - ttft[1]) < 0.5 * max(ttft) and abs(gaps[0] - gaps[1]) < 0.5 * max(gaps)
    assert len(one.runs[0].setup_ns) == 4 and one.levels[0].client.workers == 1


async def test_open_loop_in_workers(server: str) -> None:
    result = await run_bench(_config(server, workers=2, rate=200.0))
    assert result.n_failed == 0
    assert sorted(r.index for r in result.runs[0].records) == list(range(16))


async def _stop_once_streaming(seen: Seen, stop: asyncio.Event, streams: int) -> None:
    """Set ``stop`` once the server has begun ``streams`` streams (bounded: 120 s at most)."""
    async with asyncio.timeout(120):
        while seen.streams < streams:
            await asyncio.sleep(0.01)
    stop.set()


async def test_a_stop_ends_every_worker_with_partial_results() -> None:
    app = streaming_app(gap_s=0.01)
    stop = asyncio.Event()
    async with served(app) as url:
        # the stop comes once both workers stream (after their spawn and the t0 ahead), however
        # long a busy machine takes to start them
        watcher = asyncio.create_task(_stop_once_streaming(app[SEEN], stop, 8))
        config = _config(url, workers=2, requests=2000, concurrencies=(2,))
        result = await run_bench(config, stop=stop)
        await watcher
    assert result.interrupted and 0 < len(result.runs[0].records) < 2000


def _jobs(n: int) -> list[Job]:
    return [Job(i, 1, b"{}") for i in range(n)]


def test_split_deals_slots_and_jobs_in_proportion() -> None:
    closed = Part(_jobs(10), "/x", tuple(slot_starts_ns(3, 300)), t0_ns=5)
    parts = split(closed, 2)
    assert [p.starts_ns for p in parts] == [(0, 200), (100,)]
    assert [[j.index for j in p.jobs] for p in parts] == [[0, 2, 3, 5, 6, 8, 9], [1, 4, 7]]
    assert {p.t0_ns for p in parts} == {5}
    opened = Part(_jobs(5), "/x", offsets_ns=(0, 1, 2, 3, 4), cap=3)
    parts = split(opened, 2)
    assert [(p.offsets_ns, p.cap) for p in parts] == [((0, 2, 4), 2), ((1, 3), 1)]


def test_merge_sums_cpu_and_keeps_the_busiest_process() -> None:
    a = PartResult([], 1.0, 0.5, 2.0, [0.1], False, [7])
    b = PartResult([], 2.0, 0.9, 1.0, [0.2], True, [])
    both = merge([a, b])
    assert (both.cpu_s, both.run_cpu_s, both.wall_s, both.stopped) == (3.0, 0.9, 2.0, True)
    assert (both.lag_s, both.setups_ns) == ([0.1, 0.2], [7])
