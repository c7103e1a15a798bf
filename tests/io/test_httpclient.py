"""The streaming client against real loopback aiohttp servers (``tests.support.servers``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from time import perf_counter_ns

import pytest

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
from tests.support.servers import MODEL, served, streaming_app


@pytest.fixture
async def server() -> AsyncIterator[str]:
    async with served(streaming_app()) as url:
        yield url


def _record() -> RequestRecord:
    return RequestRecord(index=0, scheduled_ns=perf_counter_ns())


async def test_well_behaved_stream() -> None:
    async with served(streaming_app(gap_s=0.02)) as server:
        await _check_well_behaved(server)


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
