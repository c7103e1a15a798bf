"""The raw-protocol stream client's own seams against real loopback servers: the connect phase,
the concurrency cap, a kept-alive connection the server closed (replaced and recorded, or a plain
client's failure), the answer's head, uvloop, framing errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from time import perf_counter_ns

import pytest
import uvloop
from aiohttp import web

from servelab.core.load.records import REASON_CONNECTION, REASON_TRUNCATED, RequestRecord
from servelab.io.http.client import chat_body
from servelab.io.http.stream import StreamClient
from tests.support.servers import MODEL, served, streaming_app


@pytest.fixture
async def server() -> AsyncIterator[str]:
    async with served(streaming_app(gap_s=0.005)) as url:
        yield url


def _record(i: int = 0) -> RequestRecord:
    return RequestRecord(index=i, scheduled_ns=perf_counter_ns())


async def test_the_connect_phase_opens_the_pool_ahead(server: str) -> None:
    async with StreamClient(server, concurrency=3, trace_connections=True) as client:
        setups = await client.connect(5)  # capped at the concurrency
        assert len(setups) == 3 and all(0 < s < 5e9 for s in setups)
        assert await client.connect(3) == []  # all there already
        records = await asyncio.gather(
            *(
                client.stream("/v1/chat/completions", chat_body(MODEL, "hi", 2), _record(i))
                for i in range(3)
            )
        )
        assert all(r.ok for r in records)
        assert client.connections is not None and client.connections.opened == 3
        assert len(client.setups_ns) == 3  # the requests used the connections opened ahead


async def test_at_most_concurrency_requests_in_flight(server: str) -> None:
    async with StreamClient(server, concurrency=2) as client:
        records = await asyncio.gather(
            *(
                client.stream("/v1/chat/completions", chat_body(MODEL, "hi", 3), _record(i))
                for i in range(6)
            )
        )
    assert all(r.ok for r in records)
    assert len(client.setups_ns) == 2


async def test_a_kept_alive_connection_the_server_closed_is_replaced() -> None:
    async def once(request: web.Request) -> web.Response:
        await request.read()
        token = 'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
        return web.Response(text=token + "data: [DONE]\n\n", headers={"Connection": "keep-alive"})

    app = web.Application(handler_args={"keepalive_timeout": 0.2})
    app.router.add_post("/once", once)
    async with served(app) as url, StreamClient(url, concurrency=1, trace_connections=True) as c:
        first = await c.stream("/once", b"{}", _record())
        await asyncio.sleep(0.5)  # the server closes the idle connection
        second = await c.transfer("/once", b"{}", _record())
        # A plain client (never sends again) writes on the closed connection: that is its failure.
        async with StreamClient(url, concurrency=1, resend=False) as plain:
            await plain.stream("/once", b"{}", _record())
            await asyncio.sleep(0.5)
            failed = await plain.transfer("/once", b"{}", _record())
    assert first.ok and second.record.ok, second.record.error_detail
    assert c.connections is not None and c.connections.opened == 2
    # The replacement is a failure the client masked: kept, with how long the connection was idle.
    (resend,) = second.resends
    assert resend.before_send and 0.5 <= resend.idle_s < 5
    assert second.headers["connection"] == "keep-alive"  # the answer's head is kept
    assert failed.record.error == REASON_CONNECTION and failed.resends == []
    assert "closed" in failed.record.error_detail


async def test_bad_framing_mid_body_is_a_truncated_stream_and_in_the_head_a_connection_error() -> (
    None
):
    answers = {
        "/body": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "/head": b"HTTP/1.1 OK\r\n\r\n",
    }

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        writer.write(answers[line.split()[1].decode()])
        await writer.drain()
        writer.close()  # the bytes are wrong before the close could matter
        await writer.wait_closed()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    async with srv, StreamClient(f"http://127.0.0.1:{port}", concurrency=2) as client:
        body = await client.transfer("/body", b"{}", _record())
        head = await client.transfer("/head", b"{}", _record())
    assert body.record.error == REASON_TRUNCATED and "chunk size" in body.record.error_detail
    assert head.record.error == REASON_CONNECTION and "status line" in head.record.error_detail


def test_the_client_runs_on_uvloop() -> None:
    async def main() -> RequestRecord:
        async with (
            served(streaming_app(gap_s=0.001)) as url,
            StreamClient(url, concurrency=1) as client,
        ):
            return await client.stream("/v1/chat/completions", chat_body(MODEL, "hi", 4), _record())

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        record = runner.run(main())
    assert record.ok and record.output_tokens == 4 and record.event_tokens == [0, 1, 1, 1, 1]
