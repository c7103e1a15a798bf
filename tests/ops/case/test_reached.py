"""The load a visit reached, read from a real simulated decode's ``/metrics`` during a real bench
run through the real router; the client's own count when the decode's metrics are off."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from servelab.core.bench.contract import BenchConfig
from servelab.core.case.reached import LoadSource
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
