"""The decode scheduler follows the step-time model on an absolute schedule (in-process)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time

import pytest

from servelab.sim.engineargs import parse_worker_args
from servelab.sim.limits import Limits, resolve
from servelab.sim.metrics import WorkerMetrics
from servelab.sim.prefillscheduler import PrefillJob, order_waiting, take_batch
from servelab.sim.profile import DEFAULT_PROFILE, decode_step_s
from servelab.sim.scheduler import (
    EARLY_S,
    LAG_BUCKET_S,
    DecodeScheduler,
    Sequence,
    StepLag,
    sleep_until,
)
from servelab.sim.settings import WorkerSettings
from servelab.sim.text import plan_output


async def _run_batch(knob: int, scale: float, batch: int, steps: int) -> tuple[float, list[int]]:
    settings = WorkerSettings(role="decode", time_scale=scale, target_ctas=knob)
    metrics = WorkerMetrics()
    wedged = False
    sched = DecodeScheduler(settings, metrics, lambda: wedged)
    task = asyncio.create_task(sched.run())
    seqs = [Sequence(plan_output(0, f"p{i}", steps + 1), ctx_tokens=100) for i in range(batch)]
    t0 = time.monotonic()
    for seq in seqs:
        sched.join(seq)
    for seq in seqs:
        await asyncio.wait_for(seq.done.wait(), 30)
    elapsed = time.monotonic() - t0
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return elapsed, [s.n_out for s in seqs]


def _expected(knob: int, scale: float, batch: int, steps: int) -> float:
    return sum(
        decode_step_s(DEFAULT_PROFILE, batch, batch * (100 + k + 1), knob) * scale
        for k in range(steps)
    )


@pytest.mark.solo
async def test_batch_takes_the_modelled_time_and_emits_every_token() -> None:
    elapsed, n_outs = await _run_batch(256, 0.05, 64, 40)
    assert n_outs == [41] * 64  # the prefill token plus one per step
    expected = _expected(256, 0.05, 64, 40)
    assert expected * 0.95 <= elapsed <= expected * 1.6


@pytest.mark.solo
async def test_knob_512_is_faster_at_c64_by_the_model_ratio() -> None:
    slow, _ = await _run_batch(256, 0.05, 64, 40)
    fast, _ = await _run_batch(512, 0.05, 64, 40)
    model = _expected(512, 0.05, 64, 40) / _expected(256, 0.05, 64, 40)
    assert fast < slow
    assert abs(fast / slow - model) < 0.08


class _TimerLog(asyncio.SelectorEventLoop):
    """A real event loop that notes when each timer asked for is due."""

    def __init__(self) -> None:
        super().__init__()
        self.due: list[float] = []

    def call_at(self, when, callback, *args, context=None):  # type: ignore[no-untyped-def,override]
        self.due.append(when)
        return super().call_at(when, callback, *args, context=context)


def test_a_step_sleeps_its_last_millisecond_in_the_kernel() -> None:
    """asyncio's timers wait whole milliseconds, rounded up (a step woke up to 1 ms late): the
    loop's timer is set :data:`EARLY_S` before the deadline, the rest is slept in the kernel,
    and the step never wakes early. A short step is woken a tenth of itself early at most."""
    loop = _TimerLog()
    try:
        for step in (0.02, 0.004):
            loop.due.clear()
            deadline = loop.time() + 0.0035
            loop.run_until_complete(sleep_until(loop, deadline, step))
            assert loop.time() >= deadline
            early = min(EARLY_S, step / 10)
            assert loop.due and max(loop.due) <= deadline - early / 2, (loop.due, deadline)
    finally:
        loop.close()


def test_the_lateness_histogram_counts_each_step_in_its_bucket() -> None:
    lag = StepLag()
    for late in (0.0, 0.00005, 0.00015, 0.00215, 5.0):
        lag.add(late)
    got = lag.as_json()
    assert got["steps"] == 5 and got["bucket_s"] == LAG_BUCKET_S
    assert got["hist"] == {"0": 2, "1": 1, "21": 1, "999": 1}  # the last bucket is open-ended
    assert got["max_lag_s"] == 5.0


def _job(tokens: int, arrival: int, *, max_tokens: int = 0, cached: int = 0) -> PrefillJob:
    fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    return PrefillJob(tokens, max_tokens, arrival, fut, cached=cached)


def _limits(*argv: str) -> Limits:
    server = parse_worker_args("prefill", ["--port", "1", *argv]).server
    return resolve(server, DEFAULT_PROFILE, "prefill")[1]


async def test_a_long_prompt_is_chunked_and_a_batch_is_capped() -> None:
    jobs = [_job(20_000, 1), _job(100, 2)]
    assert [n for _, n in take_batch(jobs, _limits())] == [8192]  # chunked_prefill_size
    jobs[0].done = 16384
    assert [n for _, n in take_batch(jobs, _limits())] == [3616, 100]  # the rest, then the next
    whole = _limits("--chunked-prefill-size", "-1")
    assert [n for _, n in take_batch([_job(20_000, 1), _job(100, 2)], whole)] == [20_000]
    capped = _limits("--max-running-requests", "2")
    assert len(take_batch([_job(10, i) for i in range(5)], capped)) == 2


async def test_the_schedule_policy_orders_the_waiting_prompts() -> None:
    rng = random.Random(0)
    jobs = [_job(10, 1, max_tokens=5, cached=0), _job(10, 2, max_tokens=50, cached=8)]
    jobs.append(_job(10, 3, max_tokens=20, cached=4))
    assert [j.arrival for j in order_waiting(jobs, "fcfs", rng)] == [1, 2, 3]
    assert [j.arrival for j in order_waiting(jobs, "lof", rng)] == [2, 3, 1]
    assert [j.arrival for j in order_waiting(jobs, "lpm", rng)] == [2, 3, 1]
    jobs[0].done = 1  # a chunked job under way stays first
    assert [j.arrival for j in order_waiting(jobs, "lof", rng)] == [1, 2, 3]


async def test_max_running_requests_caps_the_decode_batch() -> None:
    args = parse_worker_args("decode", ["--port", "1", "--max-running-requests", "32"]).server
    settings = WorkerSettings(role="decode", time_scale=1.0, engine_args=args)
    sched = DecodeScheduler(settings, WorkerMetrics(), lambda: False)
    task = asyncio.create_task(sched.run())
    seqs = [Sequence(plan_output(0, f"p{i}", 8), ctx_tokens=100) for i in range(64)]
    for seq in seqs:
        sched.join(seq)
    try:
        for _ in range(10_000):  # bounded: until the first step emitted
            if any(s.n_out >= 2 for s in seqs):
                break
            await asyncio.sleep(0.001)
        assert sum(s.n_out >= 2 for s in seqs) == 32  # one step: the first 32 only
        assert sched.running == 64  # the others wait their turn
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
