"""The decode scheduler follows the step-time model on an absolute schedule (in-process)."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from servelab.sim.metrics import WorkerMetrics
from servelab.sim.profile import DEFAULT_PROFILE, decode_step_s
from servelab.sim.scheduler import LAG_BUCKET_S, DecodeScheduler, Sequence, _Lag
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


def test_the_lateness_histogram_counts_each_step_in_its_bucket() -> None:
    lag = _Lag()
    for late in (0.0, 0.00005, 0.00015, 0.00215, 5.0):
        lag.add(late)
    got = lag.as_json()
    assert got["steps"] == 5 and got["bucket_s"] == LAG_BUCKET_S
    assert got["hist"] == {"0": 2, "1": 1, "21": 1, "999": 1}  # the last bucket is open-ended
    assert got["max_lag_s"] == 5.0
