"""The stream client's idle timeout counts an event stream's ``data:`` lines, not its bytes: an
engine sending only ``: keepalive`` comments is idle (issue 38, H8); comments before the tokens
of an answer that does come do not break it."""

from __future__ import annotations

import asyncio
from time import perf_counter_ns

from aiohttp import web

from servelab.core.load.records import REASON_IDLE, RequestRecord
from servelab.io.http.client import chat_body
from servelab.io.http.stream import StreamClient
from tests.support.servers import MODEL, served

TOKEN = b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'


def _engine(comments: int, then_tokens: bool) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for _ in range(comments):  # bounded: at most 3000 x 10 ms
            await resp.write(b": keepalive\n\n")
            await asyncio.sleep(0.01)
        if then_tokens:
            await resp.write(TOKEN + TOKEN + b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


async def _one(url: str, idle_s: float) -> tuple[RequestRecord, float]:
    record = RequestRecord(index=0, scheduled_ns=perf_counter_ns())
    async with StreamClient(url, concurrency=1, idle_timeout_s=idle_s) as client:
        started = perf_counter_ns()
        await client.stream("/v1/chat/completions", chat_body(MODEL, "hi", 2), record)
    return record, (perf_counter_ns() - started) / 1e9


async def test_comments_alone_do_not_hold_the_idle_timeout_off() -> None:
    async with served(_engine(comments=3000, then_tokens=False)) as url:
        record, took = await _one(url, idle_s=0.3)
    assert record.error == REASON_IDLE and "no data line" in record.error_detail
    assert took < 10  # the engine would have gone on for 30 s


async def test_comments_before_the_tokens_leave_the_answer_whole() -> None:
    async with served(_engine(comments=10, then_tokens=True)) as url:
        record, _took = await _one(url, idle_s=5.0)
    assert record.ok, record.error_detail
    assert record.output_tokens == 2
