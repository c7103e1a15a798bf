"""The streaming client against real loopback aiohttp servers started here, on free ports.

``streaming_app()`` is also used by ``tests/ops/test_bench.py`` and ``tests/cli/test_bench_cli.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from time import perf_counter_ns

import pytest
from aiohttp import web

from servelab.core import metrics
from servelab.core.records import (
    REASON_CONNECTION,
    REASON_DEADLINE,
    REASON_IDLE,
    REASON_MALFORMED,
    RequestRecord,
)
from servelab.io.httpclient import StreamClient, chat_body
from tests.support import free_port

__all__ = ["serve", "streaming_app"]

MODEL = "sim-model"
GAP_S = web.AppKey("gap_s", float)


def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _delta(content: str, role: str | None = None) -> bytes:
    delta = {"content": content} | ({"role": role} if role else {})
    return _sse({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]})


async def _stream(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    n = int(body.get("max_tokens", 8))
    gap = request.app[GAP_S]
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(_delta("", role="assistant"))
    for i in range(n):
        await asyncio.sleep(gap)
        await resp.write(_delta(f" w{i}"))
    usage = {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": n + 3}
    await resp.write(_sse({"choices": [], "usage": usage}) + b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


async def _stall(request: web.Request) -> web.StreamResponse:
    await request.read()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(_delta("", role="assistant") + _delta("a"))
    await asyncio.sleep(30)
    return resp


async def _fail(request: web.Request) -> web.Response:
    await request.read()
    return web.json_response({"error": {"message": "decode_internal_error " * 200}}, status=500)


async def _malformed(request: web.Request) -> web.Response:
    await request.read()
    body = _delta("", role="assistant") + b"data: {'error': {'message': 'KV transfer fa"
    return web.Response(body=body, headers={"Content-Type": "text/event-stream"})


async def _models(_request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})


def streaming_app(gap_s: float = 0.002) -> web.Application:
    """Chat streams at ``/v1/...``; faulty ones at ``/stall``, ``/fail``, ``/malformed``."""
    app = web.Application()
    app[GAP_S] = gap_s
    app.router.add_post("/v1/chat/completions", _stream)
    app.router.add_get("/v1/models", _models)
    app.router.add_post("/stall", _stall)
    app.router.add_post("/fail", _fail)
    app.router.add_post("/malformed", _malformed)
    return app


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    """Start ``app`` on a free loopback port; return the runner and the base URL."""
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, f"http://127.0.0.1:{port}"


@pytest.fixture
async def server() -> AsyncIterator[str]:
    runner, url = await serve(streaming_app())
    try:
        yield url
    finally:
        await runner.cleanup()


def _record() -> RequestRecord:
    return RequestRecord(index=0, scheduled_ns=perf_counter_ns())


async def test_well_behaved_stream() -> None:
    runner, server = await serve(streaming_app(gap_s=0.02))
    try:
        await _check_well_behaved(server)
    finally:
        await runner.cleanup()


async def _check_well_behaved(server: str) -> None:
    async with StreamClient(server, concurrency=4, idle_timeout_s=5) as client:
        records = await asyncio.gather(
            *(
                client.stream("/v1/chat/completions", chat_body(MODEL, "hi", 6), _record())
                for _ in range(4)
            )
        )
    for record in records:
        assert record.ok, record.error_detail
        assert record.status == 200
        assert (record.output_tokens, record.tokens_from_usage) == (6, True)
        assert record.event_tokens == [0, 1, 1, 1, 1, 1, 1]
        assert record.scheduled_ns <= record.sent_ns <= record.first_byte_ns  # type: ignore[operator]
        gaps = metrics.gaps_ns(record)
        assert len(gaps) == 5
        # the server sleeps 20 ms between tokens and each event is stamped when its read returns
        assert sorted(gaps)[2] > 10_000_000
        assert metrics.ttft_ns(record) is not None


async def test_stalled_stream_hits_the_idle_timeout(server: str) -> None:
    start = perf_counter_ns()
    async with StreamClient(server, concurrency=1, idle_timeout_s=0.3) as client:
        record = await client.stream("/stall", chat_body(MODEL, "hi", 4), _record())
    assert record.error == REASON_IDLE
    assert record.event_tokens == [0, 1]
    assert (perf_counter_ns() - start) / 1e9 < 5


async def test_run_deadline_cuts_a_stalled_stream(server: str) -> None:
    async with StreamClient(server, concurrency=1, idle_timeout_s=20) as client:
        deadline = perf_counter_ns() + 300_000_000
        record = await client.stream("/stall", b"{}", _record(), deadline_ns=deadline)
    assert record.error == REASON_DEADLINE
    assert record.end_ns is not None
    assert record.end_ns - deadline < 2_000_000_000


async def test_http_500_is_recorded_with_a_truncated_body(server: str) -> None:
    async with StreamClient(server, concurrency=1) as client:
        record = await client.stream("/fail", b"{}", _record())
    assert (record.error, record.status) == ("http 500", 500)
    assert "decode_internal_error" in record.error_detail
    assert len(record.error_detail) <= 300


async def test_router_malformed_sse_is_a_malformed_stream(server: str) -> None:
    async with StreamClient(server, concurrency=1) as client:
        record = await client.stream("/malformed", b"{}", _record())
    assert record.error == REASON_MALFORMED
    assert not record.ok


async def test_connection_refused_is_a_connection_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    async with StreamClient(url, concurrency=1, connect_timeout_s=2) as client:
        record = await client.stream("/v1/chat/completions", b"{}", _record())
    assert record.error == REASON_CONNECTION
    assert record.end_ns is not None
