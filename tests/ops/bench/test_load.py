"""The load's sends against a real loopback server: closed and open loop write every request
without a task wake-up (request bytes built before t0), keep every record's identity headers,
schedule and send stamps, and use the connections opened ahead."""

from __future__ import annotations

import asyncio
import resource
from collections.abc import AsyncIterator
from time import perf_counter_ns

import pytest
import uvloop
from aiohttp import web

from servelab.core.load.identity import request_identity
from servelab.core.load.workload import LengthDist
from servelab.io import instant
from servelab.io.http.stream import StreamClient
from servelab.ops.bench.jobs import Job, jobs_for
from servelab.ops.bench.load import SPIN_NS, Load, sleep_until, slot_starts_ns
from tests.support.servers import MODEL, served, streaming_app

PATH = "/v1/chat/completions"
TAG = "0123456789abcdef"


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[tuple[str, str]]]]:
    app = streaming_app(gap_s=0.002)
    seen: list[tuple[str, str]] = []

    @web.middleware
    async def identity(request: web.Request, handler: object) -> web.StreamResponse:
        seen.append((request.headers.get("x-request-id", ""), request.headers["traceparent"]))
        return await handler(request)  # type: ignore[operator, no-any-return]

    app.middlewares.append(identity)
    async with served(app) as url:
        yield url, seen


def _jobs(n: int) -> list[Job]:
    return jobs_for(
        n,
        0,
        input_len=LengthDist("fixed", 8),
        output_len=LengthDist("fixed", 3),
        shared_prefix_len=0,
        model=MODEL,
        endpoint=PATH,
        ignore_eos=True,
    )


async def test_closed_loop_chains_every_users_requests(
    server: tuple[str, list[tuple[str, str]]],
) -> None:
    url, seen = server
    async with StreamClient(url, concurrency=4, trace_connections=True) as client:
        await client.connect(4)
        load = Load(client, PATH, lambda _r: None, None, TAG)
        await load.closed(_jobs(20), slot_starts_ns(4, 0))
        load.decode()
    records = load.records
    assert sorted(r.index for r in records) == list(range(20)) and load.finished == 20
    assert all(r.ok and r.output_tokens == 3 for r in records)
    assert all(r.scheduled_ns <= r.sent_ns < (r.first_byte_ns or 0) for r in records)
    # every request after a user's first is scheduled at its previous one's end
    ends = {r.end_ns for r in records}
    assert sum(r.scheduled_ns in ends for r in records) == 16
    assert sorted(seen) == sorted(request_identity(TAG, i) for i in range(20))
    assert {(r.request_id, r.traceparent) for r in records} == set(seen)
    assert len(client.setups_ns) == 4  # the four connections opened ahead carried everything


async def test_open_loop_writes_from_the_schedule_and_caps_in_flight(
    server: tuple[str, list[tuple[str, str]]],
) -> None:
    url, seen = server
    async with StreamClient(url, concurrency=8) as client:
        await client.connect(2)
        load = Load(client, PATH, lambda _r: None, None, TAG)
        await load.open(_jobs(12), 2, [i * 1_000_000 for i in range(12)])
        load.decode()
    records = load.records
    assert sorted(r.index for r in records) == list(range(12))
    assert all(r.ok and r.scheduled_ns <= r.sent_ns for r in records)
    assert sorted(seen) == sorted(request_identity(TAG, i) for i in range(12))
    spans = sorted((r.sent_ns, 1) for r in records) + sorted((r.end_ns or 0, -1) for r in records)
    in_flight, most = 0, 0
    for _at, step in sorted(spans, key=lambda x: (x[0], x[1])):
        in_flight += step
        most = max(most, in_flight)
    assert most <= 2


async def test_a_cancelled_closed_loop_leaves_no_request_unmarked(
    server: tuple[str, list[tuple[str, str]]],
) -> None:
    url, _seen = server
    async with StreamClient(url, concurrency=3) as client:
        load = Load(client, PATH, lambda _r: None, None)
        work = asyncio.create_task(load.closed(_jobs(300), slot_starts_ns(3, 0)))
        await asyncio.sleep(0.05)
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
    assert load.records and all(r.end_ns is not None for r in load.records)
    assert all(r.ok or r.error for r in load.records)


async def test_requests_written_for_tasks_that_never_ran_are_cut(
    server: tuple[str, list[tuple[str, str]]],
) -> None:
    url, _seen = server
    async with StreamClient(url, concurrency=3) as client:
        await client.connect(2)  # two first sends written at once, the third left to its task
        load = Load(client, PATH, lambda _r: None, None)
        work = asyncio.create_task(load.closed(_jobs(9), slot_starts_ns(3, 0)))
        await asyncio.sleep(0)  # the scheduler wrote the first sends and made the tasks
        work.cancel()  # before any of them ran
        await asyncio.gather(work, return_exceptions=True)
    assert len(load.records) == 3
    assert all(r.end_ns is not None and r.error for r in load.records)
    assert sum(r.sent_ns > 0 for r in load.records) == 2


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("asleep", [True, False])
def test_a_replays_last_wait_before_its_instant_asleep_or_spinning(loop: str, asleep: bool) -> None:
    """The last SPIN_NS before a replay's instant: ``asleep``, on a kernel timer (the thread
    blocks, a voluntary context switch each wait); else spinning (it never blocks); never before
    the instant. A spin there in every ``bench --workers 2`` worker held both cores of a 2-core
    machine at every instant."""
    if asleep and not instant.available():
        pytest.skip("no timerfd on this platform")

    async def main() -> None:
        early: list[int] = []
        switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
        for _ in range(20):
            due = perf_counter_ns() + SPIN_NS * 4 // 5  # inside the last SPIN_NS
            await sleep_until(due, SPIN_NS, asleep)
            early.append(due - perf_counter_ns())
        blocked = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - switches
        # asleep: most waits block (one whose instant passed while this thread waited for a
        # core, 1.2 ms, has nothing left to wait: seen once beside a whole run); spinning: the
        # thread never blocks, bar a stray switch
        assert blocked >= 10 if asleep else blocked < 20
        assert max(early) <= 0

    factory = uvloop.new_event_loop if loop == "uvloop" else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main())
