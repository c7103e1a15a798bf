"""The router's cut end marker through the real client on a loopback socket (issue 38, 34th
pass): the answer sglang-router gave at C256, framed as it framed it (its last chunk ends
``data: [DONE]\\n``, then the body's last chunk) is a whole answer; the same cut end marker on a
connection closed before the body's last chunk is still a truncated stream."""

from __future__ import annotations

import asyncio
from time import perf_counter_ns

from servelab.core.load.records import REASON_TRUNCATED, RequestRecord
from servelab.io.http.stream import StreamClient
from tests.core.load.test_records_done_cut import _LAST, _TOKEN
from tests.support import free_port

_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def _chunk(data: bytes) -> bytes:
    return b"%X\r\n%b\r\n" % (len(data), data)


async def test_the_end_marker_the_router_cut_is_a_whole_answer_until_the_body_is_cut() -> None:
    answers = {
        "/whole": [_HEAD + _chunk(_TOKEN), _chunk(_TOKEN * 2), _chunk(_LAST), b"0\r\n\r\n"],
        "/closed": [_HEAD + _chunk(_TOKEN), _chunk(_LAST)],
    }

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readuntil(b"\r\n\r\n")
        for part in answers[line.split()[1].decode()]:  # one write a read, as the router's
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(0.005)
        writer.close()
        await writer.wait_closed()

    port = free_port()
    srv = await asyncio.start_server(handle, "127.0.0.1", port)
    async with srv, StreamClient(f"http://127.0.0.1:{port}", concurrency=2) as client:
        whole = await client.stream("/whole", b"{}", RequestRecord(0, perf_counter_ns()))
        closed = await client.stream("/closed", b"{}", RequestRecord(1, perf_counter_ns()))
    assert whole.ok, (whole.error, whole.error_detail)  # before the fix: malformed stream
    assert (whole.output_tokens, whole.event_tokens) == (64, [1, 1, 1, 0])
    assert closed.error == REASON_TRUNCATED, (closed.error, closed.error_detail)
