"""A closed-loop user's next request written from the read that ended the previous one
(:class:`Chain`), a request written from the caller before its task runs (``launch``), and a
written request cut when its user stops (``drop``); against real loopback servers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from time import perf_counter_ns

import pytest

from servelab.core.load.records import REASON_INTERRUPTED, RequestRecord
from servelab.io.http.client import chat_body
from servelab.io.http.stream import Chain, Outgoing, StreamClient
from tests.support.servers import MODEL, served, streaming_app

PATH = "/v1/chat/completions"


@pytest.fixture
async def server() -> AsyncIterator[str]:
    async with served(streaming_app(gap_s=0.005)) as url:
        yield url


def _out(client: StreamClient, i: int, scheduled_ns: int, tokens: int = 2) -> Outgoing:
    record = RequestRecord(index=i, scheduled_ns=scheduled_ns, request_id=f"r{i}")
    request = client.request_bytes(PATH, chat_body(MODEL, "hi", tokens), record.request_id)
    return Outgoing(PATH, request, record, [])


async def test_the_next_request_is_written_when_the_previous_ends(server: str) -> None:
    async with StreamClient(server, concurrency=1, trace_connections=True) as client:
        left = [1, 2]

        def following(end_ns: int) -> Outgoing | None:
            return _out(client, left.pop(0), end_ns) if left else None

        chain = Chain(following)
        got = [await client.send(_out(client, 0, perf_counter_ns()), chain=chain)]
        while (out := chain.take()) is not None:
            # written before its coroutine came back: on the wire, stamped after the previous end
            assert out.record.sent_ns >= (got[-1].record.end_ns or 0) > 0
            assert out.record.scheduled_ns == got[-1].record.end_ns
            got.append(await client.send(out, chain=chain))
    assert [t.record.index for t in got] == [0, 1, 2]
    assert all(t.record.ok and t.record.status == 200 for t in got)
    assert client.connections is not None and client.connections.opened == 1
    assert client.connections.requests == 3  # one kept-alive connection carried all three


async def test_launch_writes_on_an_idle_connection_and_send_adopts_it(server: str) -> None:
    async with StreamClient(server, concurrency=2) as client:
        await client.connect(1)
        one, two = Chain(lambda _end: None), Chain(lambda _end: None)
        first, second = _out(client, 0, perf_counter_ns()), _out(client, 1, perf_counter_ns())
        client.launch(one, first)
        assert first.record.sent_ns > 0 and one.take() is first  # written before any await
        client.launch(two, second)  # no idle connection left: its send opens one
        assert two.take() is None and second.record.sent_ns == 0
        got = await asyncio.gather(client.send(first, chain=one), client.send(second, chain=two))
    assert all(t.record.ok and t.chunks for t in got)
    assert len(client.setups_ns) == 2


async def test_a_written_request_is_cut_when_its_user_stops(server: str) -> None:
    async with StreamClient(server, concurrency=1) as client:
        chain = Chain(lambda end: _out(client, 1, end, tokens=50))
        first = await client.send(_out(client, 0, perf_counter_ns()), chain=chain)
        nxt = chain.take()
        assert nxt is not None
        client.drop(chain)
        assert chain.take() is None
    assert first.record.ok
    assert nxt.record.error == REASON_INTERRUPTED and nxt.record.end_ns is not None


async def test_a_handed_off_request_on_a_connection_the_server_closed_goes_again() -> None:
    """The server answers one request per connection, then closes it without saying so: the
    request the chain wrote there is sent again on a fresh connection."""
    body = b'data: {"choices":[]}\n\ndata: [DONE]\n\n'
    answer = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
        % (len(body), body)
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
    async with srv, StreamClient(url, concurrency=1, trace_connections=True) as client:
        left = [1]
        chain = Chain(lambda end: _out(client, left.pop(), end) if left else None)
        first = await client.send(_out(client, 0, perf_counter_ns()), chain=chain)
        out = chain.take()
        second = await client.send(out, chain=chain) if out is not None else None
    assert first.record.ok
    assert second is not None and second.record.ok, second and second.record.error_detail
    assert client.connections is not None and client.connections.opened >= 2
