"""The HTTP client against real loopback aiohttp servers (``tests.support.servers``): probes
(answers, refusals, timeouts), JSON GETs and the model lookup, timestamped streams, traced
keep-alive sessions, and the one error translation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from time import perf_counter_ns

import aiohttp
import pytest
from aiohttp import web

from servelab.core.deploy import probe as probe_module
from servelab.core.deploy.probe import ProbeResult
from servelab.core.ledger.codec import encode
from servelab.core.load import metrics
from servelab.core.load.records import (
    REASON_CONNECTION,
    REASON_DEADLINE,
    REASON_IDLE,
    REASON_MALFORMED,
    REASON_TRUNCATED,
    RequestRecord,
    decode_chunks,
)
from servelab.io.http import client as http_module
from servelab.io.http import neterrors as neterrors_module
from servelab.io.http import stream as stream_module
from servelab.io.http import transfer as transfer_module
from servelab.io.http.client import (
    BODY_LIMIT,
    HttpClient,
    chat_body,
    get_json,
    model_id,
    model_list,
    probe,
    using_client,
)
from servelab.io.http.neterrors import translate
from servelab.io.http.stream import StreamClient
from tests.support import free_port
from tests.support.servers import MODEL, served, streaming_app


# ------------------------------------------------------------------------------------ streams
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


# ------------------------------------------------------------------------------------- probes
@pytest.fixture
async def probed() -> AsyncIterator[str]:
    async def health(_: web.Request) -> web.Response:
        return web.json_response({"status": "starting"}, status=503)

    async def big(_: web.Request) -> web.Response:
        return web.Response(text="x" * 5000)

    async def slow(_: web.Request) -> web.Response:
        await asyncio.sleep(1.5)
        return web.Response(text="late")

    async def echo(request: web.Request) -> web.Response:
        return web.json_response(await request.json())

    app = web.Application()
    app.add_routes(
        [
            web.get("/health", health),
            web.get("/big", big),
            web.get("/slow", slow),
            web.post("/echo", echo),
        ]
    )
    async with served(app) as url:
        yield url


async def test_http_error_status_is_an_answer(probed: str) -> None:
    result = await probe(probed + "/health", timeout=5)
    assert result.status == 503 and not result.ok and result.error is None
    assert '"starting"' in result.body
    assert result.describe().startswith("HTTP 503")
    assert encode(result)["status"] == 503


async def test_body_is_truncated(probed: str) -> None:
    result = await probe(probed + "/big", timeout=5)
    assert result.ok and len(result.body) == BODY_LIMIT


async def test_body_limit_is_chosen_or_lifted(probed: str) -> None:
    short = await probe(probed + "/big", timeout=5, body_limit=10)
    assert short.ok and short.body == "x" * 10
    whole = await probe(probed + "/big", timeout=5, body_limit=None)
    assert whole.ok and whole.body == "x" * 5000


async def test_post_json(probed: str) -> None:
    result = await probe(probed + "/echo", timeout=5, method="POST", json_body={"a": 1})
    assert result.status == 200 and result.body == '{"a": 1}'


async def test_refused_is_reported_not_raised() -> None:
    url = f"http://127.0.0.1:{free_port()}/health"
    result = await probe(url, timeout=5)
    assert result.status is None and result.error and "Connect" in result.error
    assert result.describe().startswith("no answer:")


async def test_timeout_is_reported(probed: str) -> None:
    result = await probe(probed + "/slow", timeout=0.3)
    assert result.status is None and "timed out" in (result.error or "")
    assert 0.25 < result.elapsed_s < 1.4


async def test_bad_url_is_reported() -> None:
    result = await probe("not-a-url", timeout=1)
    assert result.status is None and result.error


def test_public_api() -> None:
    assert set(http_module.__all__) == {
        "BODY_LIMIT",
        "HttpClient",
        "ModelList",
        "REDIRECTED",
        "chat_body",
        "completion_body",
        "get_json",
        "model_id",
        "model_list",
        "oversize",
        "probe",
        "using_client",
    }
    # the stream client and its transfer types are imported from where they are defined
    assert {"StreamClient"} <= set(stream_module.__all__)
    assert {"Chunks", "Connections", "Resend", "Transfer"} <= set(transfer_module.__all__)
    assert "translate" in neterrors_module.__all__
    assert "ProbeResult" in probe_module.__all__  # a probe's answer is a fact of core's


# -------------------------------------------------------------- one client, JSON, model lookup
@pytest.fixture
async def peers() -> AsyncIterator[str]:
    """``/peer`` answers with the client's port (one port: one connection); ``/doc`` JSON,
    ``/text`` not JSON, ``/gone`` 404; ``/head`` never sends a response head."""

    async def peer(request: web.Request) -> web.Response:
        assert request.transport is not None
        return web.Response(text=str(request.transport.get_extra_info("peername")[1]))

    async def head(request: web.Request) -> web.Response:
        await request.read()
        await asyncio.sleep(30)
        return web.Response(text="late")

    app = web.Application()
    app.add_routes(
        [
            web.get("/peer", peer),
            web.get("/doc", _doc),
            web.get("/text", _text),
            web.post("/head", head),
        ]
    )
    async with served(app) as url:
        yield url


async def _doc(_: web.Request) -> web.Response:
    return web.json_response({"a": [1, 2]})


async def _text(_: web.Request) -> web.Response:
    return web.Response(text="not json")


async def test_one_client_keeps_one_connection_for_its_probes(peers: str) -> None:
    async with HttpClient() as http:
        ports = {(await http.probe(peers + "/peer", timeout=5)).body for _ in range(3)}
    assert len(ports) == 1
    one_off = {(await probe(peers + "/peer", timeout=5)).body for _ in range(3)}
    assert len(one_off) == 3  # the module-level probe: a client (and connection) of its own


async def test_a_closed_client_opens_again_on_next_use(peers: str) -> None:
    http = HttpClient()
    first = await http.probe(peers + "/peer", timeout=5)
    await http.aclose()
    second = await http.probe(peers + "/peer", timeout=5)
    await http.aclose()
    assert first.ok and second.ok and first.body != second.body


async def test_get_json_is_the_document_or_none(peers: str) -> None:
    async with HttpClient() as http:
        assert await http.get_json(peers + "/doc") == {"a": [1, 2]}
        assert await http.get_json(peers + "/text") is None
        assert await http.get_json(peers + "/gone") is None
    assert await get_json(peers + "/doc", timeout=5) == {"a": [1, 2]}
    assert await get_json(f"http://127.0.0.1:{free_port()}/doc", timeout=2) is None


async def test_model_id_is_the_first_listed_model_or_none(server: str, peers: str) -> None:
    assert await model_id(server, 5) == MODEL
    assert await model_id(server + "/", 5) == MODEL
    async with HttpClient() as http:
        assert await http.model_id(server, 5) == MODEL
        assert await http.model_id(peers, 5) is None  # no /v1/models there
    assert await model_id(f"http://127.0.0.1:{free_port()}", 2) is None


async def test_model_list_says_what_answered(server: str, peers: str) -> None:
    listed = await model_list(server + "/", 5)
    assert listed.ok and listed.models == (MODEL,) and listed.url == server + "/v1/models"
    assert listed.content_type == "application/json"
    async with HttpClient() as http:
        missing = await http.model_list(peers, 5)
    assert not missing.ok and missing.status == 404 and missing.error is None
    assert missing.describe().startswith(f"{peers}/v1/models answered HTTP 404")
    refused = await model_list(f"http://127.0.0.1:{free_port()}", 2)
    assert not refused.ok and refused.status is None
    assert "no answer" in refused.describe()


def test_html_bodies_are_summarised_not_quoted() -> None:
    page = "<!DOCTYPE HTML>\n<html><head><title>Error response</title></head><body>x</body></html>"
    result = ProbeResult("http://h/health", 404, page, 0.1)
    assert result.describe() == 'HTTP 404 (HTML page "Error response")'
    assert ProbeResult("u", 502, "<html><body>bad</body></html>", 0.1).describe() == (
        "HTTP 502 (HTML page)"
    )
    assert ProbeResult("u", 503, '{"status":"starting"}', 0.1).describe() == (
        'HTTP 503 {"status":"starting"}'
    )


async def test_using_client_lends_the_callers_client_or_opens_its_own(peers: str) -> None:
    async with HttpClient() as mine:
        async with using_client(mine) as lent:
            assert lent is mine
        assert (await mine.probe(peers + "/peer", timeout=5)).ok  # still open: not closed by lend
    async with using_client(None) as own:
        assert isinstance(own, HttpClient) and (await own.probe(peers + "/peer", timeout=5)).ok


# ------------------------------------------------------------ traced keep-alive, transfers
async def _three_streams(client: StreamClient) -> list[int]:
    carried = []
    for _ in range(3):
        record = await client.stream("/v1/chat/completions", chat_body(MODEL, "hi", 2), _record())
        assert record.ok, record.error_detail
        assert client.connections is not None
        carried.append(client.connections.carried)
    return carried


async def test_keep_alive_client_traces_one_connection_carrying_every_request(
    server: str,
) -> None:
    async with StreamClient(server, concurrency=1, trace_connections=True) as client:
        carried = await _three_streams(client)
        assert client.connections is not None
        assert (client.connections.opened, client.connections.requests) == (1, 3)
        assert 0 <= client.connections.age_s() < 5
    assert carried == [0, 1, 2]


async def test_force_close_opens_a_fresh_connection_for_every_request(server: str) -> None:
    async with StreamClient(
        server, concurrency=1, force_close=True, trace_connections=True
    ) as client:
        carried = await _three_streams(client)
        assert client.connections is not None and client.connections.opened == 3
    assert carried == [0, 0, 0]
    async with StreamClient(server, concurrency=1) as untraced:
        assert untraced.connections is None


async def test_transfer_leaves_the_reads_undecoded(server: str) -> None:
    async with StreamClient(server, concurrency=1) as client:
        got = await client.transfer("/v1/chat/completions", chat_body(MODEL, "hi", 3), _record())
    assert got.record.ok and got.phase == "body" and got.record.event_tokens == []
    assert got.received_bytes == sum(len(data) for _, data in got.chunks) > 0
    assert all(a[0] <= b[0] for a, b in zip(got.chunks, got.chunks[1:], strict=False))
    decode_chunks(got.record, got.chunks, got.record.end_ns or 0)
    assert got.record.output_tokens == 3 and got.record.ok


async def test_transfer_keeps_an_http_error_body(server: str) -> None:
    async with StreamClient(server, concurrency=1) as client:
        got = await client.transfer("/fail", b"{}", _record())
    assert got.record.error == "http 500" and got.chunks == []
    assert got.received_bytes == len(got.error_body) > 300  # the body, not the cut detail
    assert b"decode_internal_error" in got.error_body


async def test_no_response_head_is_an_idle_stall_in_the_head_phase(peers: str) -> None:
    start = perf_counter_ns()
    async with StreamClient(peers, concurrency=1, idle_timeout_s=0.3) as client:
        got = await client.transfer("/head", b"{}", _record())
    assert got.record.error == REASON_IDLE and got.phase == "head"
    assert got.record.status is None and got.received_bytes == 0
    assert (perf_counter_ns() - start) / 1e9 < 5


async def test_a_stream_cut_mid_body_is_truncated() -> None:
    async def cut(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        resp.content_length = 10_000
        await resp.prepare(request)
        await resp.write(b"data: {}\n\n")
        assert request.transport is not None
        request.transport.close()
        return resp

    app = web.Application()
    app.router.add_post("/cut", cut)
    async with served(app) as url, StreamClient(url, concurrency=1) as client:
        got = await client.transfer("/cut", b"{}", _record())
    assert got.record.error == REASON_TRUNCATED and got.phase == "body"


# ---------------------------------------------------------------------- the one translation
async def test_translate_names_the_reason_and_the_error() -> None:
    url = f"http://127.0.0.1:{free_port()}/"
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientError) as refused:
            await session.get(url)
    reason, detail = translate(refused.value)
    assert reason == REASON_CONNECTION and detail.startswith("ClientConnectorError: ")
    assert translate(aiohttp.ClientPayloadError("cut short")) == (REASON_TRUNCATED, "cut short")
    assert translate(TimeoutError(), timeout_s=2) == (REASON_CONNECTION, "timed out after 2s")
    assert translate(aiohttp.ConnectionTimeoutError("x"))[1] == "connect timeout: x"
    assert translate(ConnectionResetError())[1] == "ConnectionResetError: ConnectionResetError"
    assert len(translate(OSError("x" * 1000))[1]) == 300
