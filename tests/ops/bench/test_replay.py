"""``run_bench`` replaying a trace against a real loopback server that keeps a prefix cache of
its own: lone requests at their instants, conversations turn by turn after each answer and its
delay, the window, cached tokens per request and per conversation, the SLO judged."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from time import perf_counter_ns

import pytest
from aiohttp import web

from servelab.core.bench.contract import TRACE_LEVEL, BenchConfig
from servelab.core.load.metrics import dispatch_delay_ns, ttft_ns
from servelab.core.load.slo import parse_slo
from servelab.core.load.trace import PromptBuilder, TracePlan, TraceWindow, session_offsets_ns
from servelab.io import instant
from servelab.io.http.client import chat_body
from servelab.io.http.stream import Chain, Outgoing, StreamClient
from servelab.io.tracefile import trace_sessions
from servelab.ops.bench.bench import run_bench
from servelab.ops.bench.jobs import Job
from servelab.ops.bench.load import HELD_NS, Load
from servelab.ops.bench.replay import Replay
from tests.support.servers import served

GAP_S = 0.002


class _Cache:
    """The prompts seen so far: a request's cached tokens are its longest word prefix among
    them (never the whole prompt), as an engine's prefix cache reports them."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def cached(self, words: list[str]) -> int:
        best = 0
        for old in self.seen:
            n = 0
            for a, b in zip(old, words, strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        self.seen.append(words)
        return min(best, len(words) - 1)


async def _stream(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    words = body["messages"][0]["content"].split()
    n = int(body["max_tokens"])
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for i in range(n):
        await asyncio.sleep(GAP_S)
        chunk = {"choices": [{"index": 0, "delta": {"content": f" w{i}"}}]}
        await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    cached = request.app[CACHE].cached(words)
    usage = {"prompt_tokens": len(words), "completion_tokens": n,
             "prompt_tokens_details": {"cached_tokens": cached}}  # fmt: skip
    await resp.write(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n")
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


CACHE = web.AppKey("cache", _Cache)


@pytest.fixture
async def server() -> AsyncIterator[str]:
    app = web.Application()
    app[CACHE] = _Cache()
    app.router.add_post("/v1/chat/completions", _stream)
    async with served(app) as url:
        yield url


def _trace(tmp_path: Path) -> Path:
    lines = [
        {"timestamp": 1000, "input_length": 40, "output_length": 3, "hash_ids": [1, 2]},
        {"session_id": "s1", "timestamp": 1100, "input_length": 50, "output_length": 4,
         "hash_ids": [10, 11, 12]},
        {"session_id": "s1", "delay": 80, "input_length": 70, "output_length": 4,
         "hash_ids": [10, 11, 13, 14]},
        {"session_id": "s1", "delay": 40, "input_length": 90, "output_length": 4,
         "hash_ids": [10, 11, 13, 15, 16]},
        {"timestamp": 1300, "input_length": 30, "output_length": 2, "hash_ids": [1]},
        {"timestamp": 9000, "input_length": 30, "output_length": 2},
    ]  # fmt: skip
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _config(url: str, plan: TracePlan, **kw: object) -> BenchConfig:
    base: dict[str, object] = {"url": url, "concurrencies": (TRACE_LEVEL,), "trace": plan,
                               "model": "m", "idle_timeout_s": 5.0}  # fmt: skip
    return BenchConfig(**(base | kw))  # type: ignore[arg-type]


async def test_a_trace_is_replayed_at_its_instants_and_its_turns_after_their_answers(
    server: str, tmp_path: Path
) -> None:
    plan = TracePlan(str(_trace(tmp_path)), block_size=20, speedup=2.0, window=TraceWindow(0, 5))
    result = await asyncio.wait_for(run_bench(_config(server, plan)), 20)
    (run,) = result.runs
    records = sorted(run.records, key=lambda r: r.index)
    assert [r.index for r in records] == [0, 1, 2, 3, 4]  # the window left the 9 s one out
    assert [r.session for r in records] == [None, 1, 1, 1, None]
    t0 = records[0].scheduled_ns
    # lone requests and a conversation's first turn at (timestamp - first) / speedup
    assert (records[1].scheduled_ns - t0, records[4].scheduled_ns - t0) == (50e6, 150e6)
    # a later turn: its delay / speedup after the answer before it ended
    assert records[2].scheduled_ns == records[1].end_ns + 40_000_000
    assert records[3].scheduled_ns == records[2].end_ns + 20_000_000
    for r in records:
        assert r.ok and r.output_tokens == [3, 4, 4, 4, 2][r.index]
        # sent at its instant, never before it; how late is a benchmark's claim
        # (benchmarks/trace_replay.py), not this test's: a loaded machine delays it tens of ms
        assert 0 <= dispatch_delay_ns(r) < 500_000_000
        assert (ttft_ns(r) or 0) > 0
    assert [r.input_tokens for r in records] == [40, 50, 70, 90, 30]
    # equal ids, equal prefixes: the server's cache finds them; a later turn finds the whole
    # prompt before it (the partial block it rewrites starts with that block's words)
    assert [r.cached_tokens for r in records] == [0, 0, 50, 70, 20]
    (s1,) = run.sessions
    assert (s1.session, s1.requests, s1.failed) == ("s1", 3, 0)
    assert s1.cache.hit_rate == pytest.approx(120 / 210)
    assert s1.warm.hit_rate == pytest.approx(120 / 160)
    level = result.levels[0]
    assert level.concurrency == TRACE_LEVEL and level.n_requests == 5
    assert level.cache.hit_rate == pytest.approx(140 / 280)


async def test_a_replay_is_judged_by_its_slo_and_a_deadline_cuts_it(
    server: str, tmp_path: Path
) -> None:
    plan = TracePlan(str(_trace(tmp_path)), block_size=20, speedup=1.0)
    slo = parse_slo("ttft_p50=1s,e2e_p99=2ms")
    result = await asyncio.wait_for(run_bench(_config(server, plan, slo=slo, deadline_s=1.0)), 20)
    (run,) = result.runs
    assert run.deadline_hit and len(run.records) == 5  # the 9 s request never went
    assert run.slo is not None and run.slo.requests == 5
    ttft, e2e = run.slo.objectives
    assert ttft.met and not e2e.met and not run.slo.met
    assert run.metrics.goodput == 0.0


async def test_a_bursts_requests_are_all_built_before_its_instant(
    server: str, tmp_path: Path
) -> None:
    """The twelve conversations a trace starts at one instant, a second after a lone request:
    every one of their requests is built (prompt and body) before the instant, so at the
    instant all twelve are written one after the other, in the trace's order, none behind
    another's prompt (one clock: the client's)."""
    lines = [{"timestamp": 0, "input_length": 40, "output_length": 2, "hash_ids": [99]}]
    lines += [{"session_id": f"s{k}", "timestamp": 1000, "input_length": 400 + k,
               "output_length": 2, "hash_ids": [k]} for k in range(12)]  # fmt: skip
    path = tmp_path / "burst.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    built: list[int] = []

    def body(prompt: str, max_tokens: int) -> bytes:
        built.append(perf_counter_ns())
        return chat_body("m", prompt, max_tokens)

    sessions = session_offsets_ns(trace_sessions(path), speedup=10.0)
    replay = Replay(sessions, PromptBuilder(20, 0), body, 10.0)
    async with StreamClient(server, concurrency=16) as client:
        load = Load(client, "/v1/chat/completions", lambda _r: None, None, "00000000000000aa")
        await asyncio.wait_for(load.replay(replay), 20)
    records = sorted(load.records, key=lambda r: r.index)
    assert len(records) == 13 and all(r.ok for r in records)
    burst = records[1:]
    (instant,) = {r.scheduled_ns for r in burst}
    assert len(built) == 13 and max(built) < instant  # every body built ahead
    sent = [r.sent_ns for r in burst]
    assert sent == sorted(sent) and min(sent) >= instant
    assert max(sent) < min(r.first_byte_ns or 0 for r in burst)  # written before any answer


async def test_a_first_instants_burst_is_built_before_the_clock_starts(
    server: str, tmp_path: Path
) -> None:
    """A trace whose first instant is a burst of ten (as a window of Mooncake's conversation
    trace starts): the clock starts once their requests are built and their connections open,
    so none of them is built on the burst's own time (it was: the whole first burst left late
    by its building, ~3 ms at p99 in ``benchmarks/trace_replay.py --bursty``)."""
    lines = [{"session_id": f"s{k}", "timestamp": 5000, "input_length": 400 + k,
              "output_length": 2, "hash_ids": [k]} for k in range(10)]  # fmt: skip
    lines += [{"timestamp": 5100, "input_length": 40, "output_length": 2, "hash_ids": [99]}]
    path = tmp_path / "first.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    built: list[int] = []

    def body(prompt: str, max_tokens: int) -> bytes:
        built.append(perf_counter_ns())
        return chat_body("m", prompt, max_tokens)

    replay = Replay(
        session_offsets_ns(trace_sessions(path), 10.0), PromptBuilder(20, 0), body, 10.0
    )
    async with StreamClient(server, concurrency=16) as client:
        load = Load(client, "/v1/chat/completions", lambda _r: None, None, "00000000000000ab")
        await asyncio.wait_for(load.replay(replay), 20)
    records = sorted(load.records, key=lambda r: r.index)
    assert len(records) == 11 and all(r.ok for r in records)
    burst = records[:10]
    (instant,) = {r.scheduled_ns for r in burst}  # t0: the first instant is at offset 0
    assert records[10].scheduled_ns - instant == 10_000_000  # (5100 - 5000) ms / 10
    assert len(built) == 11 and max(built[:10]) < instant  # built before the clock started
    sent = [r.sent_ns for r in burst]
    assert sent == sorted(sent) and min(sent) >= instant
    assert max(sent) < min(r.first_byte_ns or 0 for r in burst)  # written before any answer


class _Watched(Load):
    """A :class:`Load` noting this thread's scheduling policy at each request it writes."""

    policies: list[int]
    #: each write this much longer (a loaded machine's writes): the hold's stretches end
    slow_ns = 0

    def _launch(self, job: Job, scheduled: int) -> tuple[Chain, Outgoing]:
        self.policies.append(os.sched_getscheduler(0))
        until = perf_counter_ns() + self.slow_ns
        while perf_counter_ns() < until:
            pass
        return super()._launch(job, scheduled)


def _burst_lines(n: int, at: int = 0) -> list[dict[str, object]]:
    return [{"session_id": f"s{k}", "timestamp": at, "input_length": 40, "output_length": 1,
             "hash_ids": [k]} for k in range(n)]  # fmt: skip


async def _watched_replay(
    server: str, path: Path, lines: list[dict[str, object]], tag: str, slow_ns: int = 0,
    asleep: bool = False,
) -> _Watched:  # fmt: skip
    """``lines`` replayed at speedup 10 by a :class:`_Watched` load (its writes ``slow_ns``
    longer each)."""
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    replay = Replay(session_offsets_ns(trace_sessions(path), 10.0), PromptBuilder(20, 0),
                    lambda prompt, n: chat_body("m", prompt, n), 10.0)  # fmt: skip
    async with StreamClient(server, concurrency=256) as client:
        load = _Watched(client, "/v1/chat/completions", lambda _r: None, None, tag, asleep=asleep)
        load.policies, load.slow_ns = [], slow_ns
        await asyncio.wait_for(load.replay(replay), 60)
    return load


async def test_a_bursts_requests_are_written_ahead_of_ordinary_processes(
    server: str, tmp_path: Path
) -> None:
    """A burst of 130 conversations at one instant: each request is written ``SCHED_FIFO``
    (the router each write wakes no longer takes the writer's core between two of them; CI
    runs as root), the thread back to its policy after; a lone request after them too."""
    lines = _burst_lines(130)
    lines += [{"timestamp": 100, "input_length": 40, "output_length": 1, "hash_ids": [999]}]
    load = await _watched_replay(server, tmp_path / "held.jsonl", lines, "00000000000000ac")
    assert len(load.records) == 131 and all(r.ok for r in load.records)
    assert load.policies == [os.SCHED_FIFO] * 131
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


async def test_a_long_bursts_writes_are_held_a_stretch_at_a_time(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thirty-third pass: a burst's writes were held 64 at a time, back to back (33-61 ms
    of real-time priority on each core with two workers): the hold now ends every HELD_NS and
    the thread is ordinary between two stretches. Twelve writes of 0.5 ms each: three stretches
    at least, every write held."""
    entered: list[int] = []
    real_held = instant.held

    @contextlib.contextmanager
    def counted() -> Iterator[bool]:
        entered.append(os.sched_getscheduler(0))  # ordinary between two stretches
        with real_held() as ahead:
            yield ahead

    monkeypatch.setattr(instant, "held", counted)
    load = await _watched_replay(server, tmp_path / "stretch.jsonl", _burst_lines(12),
                                 "00000000000000ad", slow_ns=HELD_NS // 4)  # fmt: skip
    assert len(load.records) == 12 and all(r.ok for r in load.records)
    assert load.policies == [os.SCHED_FIFO] * 12
    assert 3 <= len(entered) <= 12 and set(entered) == {os.SCHED_OTHER}


async def test_asleep_the_wait_for_an_instant_is_held_into_its_burst(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Client processes on every core (``asleep``): the last wait before an instant sleeps on
    the kernel timer held, so the kernel runs the thread the moment it fires (two workers'
    dispatch p99 0.39-0.59 ms against 1.90-2.43 in ``benchmarks/trace_replay.py --bursty``),
    the hold going on into the burst's first writes; ordinary once the burst is written."""
    waited: list[int] = []
    real_wait = instant.wait_until

    async def watched(when_ns: int) -> None:
        waited.append(os.sched_getscheduler(0))
        await real_wait(when_ns)

    monkeypatch.setattr(instant, "wait_until", watched)
    lines = _burst_lines(3)
    lines += [{**line, "session_id": f"t{k}"} for k, line in enumerate(_burst_lines(2, 3000))]
    sampled: list[int] = []

    async def sample() -> None:  # the policy while the replay waits 300 ms for its second instant
        while True:
            sampled.append(os.sched_getscheduler(0))
            await asyncio.sleep(0.01)

    sampler = asyncio.create_task(sample())
    try:
        load = await _watched_replay(server, tmp_path / "asleep.jsonl", lines,
                                     "00000000000000ae", asleep=True)  # fmt: skip
    finally:
        sampler.cancel()
    assert len(load.records) == 5 and all(r.ok for r in load.records)
    assert waited and set(waited) == {os.SCHED_FIFO}  # the second instant's wait, held
    assert load.policies == [os.SCHED_FIFO] * 5
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
    # the thirty-fourth pass: the whole 300 ms wait was held (asyncio.sleep included), every
    # other task of the loop run ahead of the server; only its last 1.5 ms is
    assert len(sampled) >= 5 and sampled.count(os.SCHED_OTHER) >= len(sampled) // 2, sampled
