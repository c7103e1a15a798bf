"""``find_capacity`` against real loopback servers whose token gap grows with the streams in
flight (the SLO binds: bracketed) or whose streams are capped (throughput saturates first)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from aiohttp import web

from servelab.core.bench.contract import BenchConfig
from servelab.core.load.capacity import CapacityStop, LoadKind, Probe, conclude
from servelab.core.load.slo import parse_slo
from servelab.core.load.workload import LengthDist
from servelab.ops.bench.capacity import find_capacity, search_bounds
from servelab.report.capacity import (
    capacity_json,
    capacity_markdown,
    conclusion,
    conclusion_of,
    first_error,
)
from servelab.report.slo import attainment_text

#: A gap: 8 ms, and 2 ms per stream in flight: wide enough that a loaded machine's few
#: milliseconds of loop lag do not move the capacity the SLO below allows.
BASE_S, STEP_S = 0.008, 0.002
INFLIGHT = web.AppKey("inflight", list[int])
SLOTS = web.AppKey("slots", asyncio.Semaphore)


async def _stream(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    n = int(body["max_tokens"])
    async with request.app[SLOTS]:
        inflight = request.app[INFLIGHT]
        inflight[0] += 1
        try:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for i in range(n):
                await asyncio.sleep(BASE_S + STEP_S * inflight[0])
                chunk = {"choices": [{"index": 0, "delta": {"content": f" w{i}"}}]}
                await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp
        finally:
            inflight[0] -= 1


async def _serve(slots: int) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app[INFLIGHT] = [0]
    app[SLOTS] = asyncio.Semaphore(slots)
    app.router.add_post("/v1/chat/completions", _stream)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


@pytest.fixture
async def growing() -> AsyncIterator[str]:
    runner, url = await _serve(slots=1000)
    yield url
    await runner.cleanup()


@pytest.fixture
async def capped() -> AsyncIterator[str]:
    runner, url = await _serve(slots=3)
    yield url
    await runner.cleanup()


def _config(url: str, slo: str, **kw: object) -> BenchConfig:
    base: dict[str, object] = {"url": url, "requests": 24, "model": "m", "slo": parse_slo(slo),
                               "input_len": LengthDist("fixed", 8),
                               "output_len": LengthDist("fixed", 12), "ramp_s": 0.0}  # fmt: skip
    return BenchConfig(**(base | kw))  # type: ignore[arg-type]


async def test_the_capacity_is_bracketed_where_the_slo_stops_holding(growing: str) -> None:
    # TPOT ≈ 8 + 2C ms: a 21 ms p50 holds up to C6 (C3's 14 ms has 7 ms of room for lag)
    config = _config(growing, "tpot_p50=21ms", concurrencies=(1, 16))
    assert search_bounds(config) == (LoadKind.CONCURRENCY, 1.0, 16.0)
    found = await asyncio.wait_for(find_capacity(config), 120)
    cap = found.capacity
    assert cap.stop == CapacityStop.BRACKETED, cap
    assert cap.capacity is not None and cap.above is not None
    assert 3 <= cap.capacity <= 8 and cap.above == cap.capacity + 1
    assert [p.load for p in cap.probes][:4] == [1, 2, 4, 8]
    assert len(found.runs) == len(cap.probes) and all(r.slo for r in found.runs)


async def test_saturation_stops_the_search_when_the_slo_does_not_bind(capped: str) -> None:
    config = _config(capped, "tpot_p50=1s", concurrencies=(1, 64))
    found = await asyncio.wait_for(find_capacity(config), 120)
    cap = found.capacity
    assert cap.stop == CapacityStop.SATURATED, [(p.load, p.throughput) for p in cap.probes]
    assert cap.capacity is not None and 2 <= cap.capacity <= 8


#: What a broken engine answers every request with: a secret, a terminal escape, a NUL, a BOM,
#: and far more than a line.
HOSTILE = (
    "\ufeffboom \x1b[31mred\x1b[0m\x00 Authorization: Bearer sk-live-0123456789abcdefXYZ " * 4000
)


async def _refuse(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(status=500, text=HOSTILE)


async def test_a_search_whose_requests_fail_stops_with_no_verdict_and_a_clean_first_error() -> None:
    """Issue 38 (22nd pass M2): failed requests are no miss; the first error said on one clean
    line (redacted, cut, no control character)."""
    app = web.Application()
    app.router.add_post("/v1/chat/completions", _refuse)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        config = _config(f"http://127.0.0.1:{port}", "ttft_p99=1s", concurrencies=(4, 16))
        found = await asyncio.wait_for(find_capacity(config, warm_first=True), 60)
    finally:
        await runner.cleanup()
    cap = found.capacity
    assert cap.stop == CapacityStop.FAILED and cap.capacity is None
    assert [p.load for p in cap.probes] == [4] and cap.probes[0].failed == 1.0
    error = first_error(found)
    assert error is not None and error.startswith("http 500: boom")
    assert "sk-live" not in error and "\x1b" not in error and "\x00" not in error
    assert len(error) < 1000 and "\n" not in error
    words = capacity_json(found)
    assert "sk-live" not in words and "\\u001b" not in words
    assert json.loads(words)["first_error"] == error
    assert "first error: http 500" in conclusion(cap, error)


async def test_the_markdown_s_last_probe_is_a_probe_s_never_a_cut_run(growing: str) -> None:
    """26th pass M1: a search stopped during its first probe wrote "interrupted before any probe
    completed" and then "Last probe: 0.0% of 1 requests met every objective: SLO missed" (the
    cut run's, no probe's). The line is the last probe's run, or absent with no probe."""
    config = _config(growing, "tpot_p50=21ms", concurrencies=(1, 16))
    found = await asyncio.wait_for(find_capacity(config), 120)
    assert len(found.capacity.probes) >= 2 and len(found.runs) == len(found.capacity.probes)
    first = found.runs[0].slo
    assert first is not None
    cut = replace(found, capacity=replace(found.capacity, probes=found.capacity.probes[:1]))
    assert f"Last probe: {attainment_text(first)}." in capacity_markdown(cut)
    none = replace(found, capacity=replace(found.capacity, probes=()))
    assert "Last probe" not in capacity_markdown(none)


async def test_a_search_stopped_before_its_first_probe_says_no_probe_completed(
    growing: str,
) -> None:
    """Issue 38 (Known after the 23rd pass): a search interrupted before its first probe said
    "interrupted: the SLO held at – so far"; now, in the text and the JSON, that no probe
    completed. One interrupted after a miss says no load held (not "held at –")."""
    stop = asyncio.Event()
    stop.set()
    config = _config(growing, "tpot_p50=21ms", concurrencies=(1, 16))
    found = await asyncio.wait_for(find_capacity(config, stop=stop), 60)
    cap = found.capacity
    assert cap.stop == CapacityStop.INTERRUPTED and not cap.probes and cap.capacity is None
    said = conclusion_of(found, None)
    assert said.startswith("interrupted before any probe completed: no load was judged"), said
    assert "–" not in said and "held at" not in said
    doc = json.loads(capacity_json(found))
    assert (doc["capacity"], doc["probes"], doc["conclusion"]) == (None, [], said)
    assert "before any probe completed" in capacity_markdown(found)
    missed = conclude([Probe(8, False, True, 10.0, 2.0)], kind=LoadKind.CONCURRENCY,
                      interrupted=True)  # fmt: skip
    assert conclusion(missed) == "interrupted: the SLO held at no load so far (missed down to C8)"
