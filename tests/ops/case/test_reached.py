"""The load a visit reached, read from a real simulated decode's ``/metrics`` during a real bench
run through the real router; the client's own count when the decode's metrics are off."""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Iterator

import pytest

from servelab.core.bench.contract import BenchConfig
from servelab.core.case.reached import LoadSource
from servelab.core.load.metrics import e2e_ns
from servelab.core.load.records import RequestRecord
from servelab.core.load.workload import LengthDist
from servelab.core.telemetry.promtext import parse_exposition
from servelab.core.telemetry.summary import MetricsSource
from servelab.ops.bench.bench import run_bench
from servelab.ops.case.reached import RunningWatch, reached_load, running_gauge
from tests.support.http import set_faults
from tests.support.stack import SimStack, sim_stack

LEVEL = 8


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    with sim_stack(time_scale=0.05) as st:
        yield st


async def _watched(stack: SimStack) -> tuple[RunningWatch, list[RequestRecord]]:
    config = BenchConfig(url=stack.router_url, concurrencies=(LEVEL,), requests=160, warmup=0,
                         model="sim-model", input_len=LengthDist("fixed", 32),
                         output_len=LengthDist("fixed", 64))  # fmt: skip
    decode = MetricsSource("decode", "engine", f"{stack.decode_url}/metrics", role="decode")
    async with RunningWatch([decode], interval_s=0.05) as watch:
        result = await run_bench(config)
    return watch, [r for run in result.runs for r in run.records]


async def _burst(stack: SimStack) -> tuple[RunningWatch, list[RequestRecord]]:
    """An answers visit's shape: C64, 400 short requests (about a second), the default watch."""
    config = BenchConfig(url=stack.router_url, concurrencies=(64,), requests=400, warmup=0,
                         model="sim-model", input_len=LengthDist("fixed", 32),
                         output_len=LengthDist("fixed", 16))  # fmt: skip
    decode = MetricsSource("decode", "engine", f"{stack.decode_url}/metrics", role="decode")
    async with RunningWatch([decode]) as watch:
        result = await run_bench(config)
    return watch, [r for run in result.runs for r in run.records]


@pytest.mark.timeout(120)
def test_the_watch_reads_every_wave_of_a_short_run(stack: SimStack) -> None:
    """Issue 34/38 (fixE): a closed loop at C64 sends in waves, and the decode's gauge swings
    from 0 to its crest and back within one request's E2E (0, 25, 0, 0, 28 read under load);
    one read per 0.2 s was one per wave, and could read the troughs of a one-second run (a
    suspect arm that gave the bf16 keys' wrong answers recorded "load 11"). The default watch
    reads the decode at least twice per median E2E of the run, and sees the crest."""
    watch, records = asyncio.run(_burst(stack))
    got = reached_load(watch, records)
    assert got is not None and got.source is LoadSource.ENGINE, got
    done = [r for r in records if r.end_ns is not None]
    e2e = statistics.median(x for r in done if (x := e2e_ns(r)) is not None)
    # from the first token out (a fresh stack's first requests wait their cold start idle)
    span = max(r.end_ns or 0 for r in done) - min(r.first_byte_ns or r.end_ns or 0 for r in done)
    assert len(records) == 400 and got.samples >= 2 * span / e2e, (got, span, e2e)
    assert got.peak > 16, got


@pytest.mark.timeout(120)
def test_the_decode_gauge_then_the_client_count(stack: SimStack) -> None:
    watch, records = asyncio.run(_watched(stack))
    got = reached_load(watch, records)
    assert got is not None and got.source is LoadSource.ENGINE, got
    assert got.series == "sglang:num_running_reqs" and got.samples >= 3
    assert 2 <= got.peak <= LEVEL and 0 < got.median <= got.peak
    set_faults(stack.decode_url, no_metrics=True)
    try:
        watch, records = asyncio.run(_watched(stack))
    finally:
        set_faults(stack.decode_url, no_metrics=False)
    assert watch.series == "" and watch.values == []  # the decode said nothing
    got = reached_load(watch, records)
    assert got is not None and got.source is LoadSource.CLIENT and got.series == ""
    assert got.peak == LEVEL and got.samples == len(records)


def test_vllm_names_its_gauge_its_own_way() -> None:
    text = ('# TYPE vllm:num_requests_running gauge\n'
            'vllm:num_requests_running{engine="0",model_name="m"} 5\n'
            'vllm:num_requests_running{engine="1",model_name="m"} 7\n')  # fmt: skip
    assert running_gauge(parse_exposition(text)) == ("vllm:num_requests_running", 12.0)
    assert running_gauge(parse_exposition("sglang:num_queue_reqs 3\n")) is None


def test_a_gauge_that_is_nan_or_overflows_is_no_reading() -> None:
    """Issue 38 H4: a NaN gauge is not reported; two of 1e308 sum past every float: no reading."""
    nan = 'sglang:num_running_reqs{dp="0"} NaN\nvllm:num_requests_running 4\n'
    assert running_gauge(parse_exposition(nan)) == ("vllm:num_requests_running", 4.0)
    big = 'sglang:num_running_reqs{dp="0"} 1e308\nsglang:num_running_reqs{dp="1"} 1e308\n'
    assert running_gauge(parse_exposition(big)) is None
