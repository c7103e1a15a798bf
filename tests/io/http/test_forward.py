"""The streaming client and the probes through a real forward proxy (tinyproxy, as a plain
process): the absolute form reaches the target, and the proxy is what the target sees."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.load.records import REASON_CONNECTION, RequestRecord
from servelab.io.http.client import HttpClient
from servelab.io.http.forward import forward_proxy
from servelab.io.http.stream import StreamClient
from tests.support import free_port
from tests.support.forward import running_tinyproxy
from tests.support.stack import SimStack, sim_stack


@pytest.fixture(scope="module")
def sim_pd() -> Iterator[SimStack]:
    with sim_stack(time_scale=0.05) as st:
        yield st


def test_a_stream_and_a_probe_go_through_the_proxy(tmp_path: Path, sim_pd: SimStack) -> None:
    with running_tinyproxy(tmp_path / "fwd") as proxy:

        async def go() -> tuple[RequestRecord, int | None]:
            body = b'{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4,'
            body += b'"stream":true}'
            record = RequestRecord(index=0, scheduled_ns=0)
            async with StreamClient(sim_pd.router_url, concurrency=1, proxy=proxy.url) as c:
                await c.stream("/v1/chat/completions", body, record)
            async with HttpClient(proxy=proxy.url) as http:
                probe = await http.probe(sim_pd.router_url + "/health", timeout=10)
            return record, probe.status

        record, status = asyncio.run(go())
        assert record.ok and record.output_tokens > 0 and status == 200
        log = proxy.log.read_text()
        assert f"POST {sim_pd.router_url}/v1/chat/completions" in log
        assert f"GET {sim_pd.router_url}/health" in log


def test_a_proxy_that_is_not_listening_is_the_requests_failure(sim_pd: SimStack) -> None:
    async def go() -> RequestRecord:
        record = RequestRecord(index=0, scheduled_ns=0)
        dead = f"http://127.0.0.1:{free_port()}"
        async with StreamClient(sim_pd.router_url, concurrency=1, proxy=dead) as c:
            await c.stream("/v1/chat/completions", b"{}", record)
        return record

    record = asyncio.run(go())
    assert not record.ok and record.error == REASON_CONNECTION


def test_the_proxys_credentials_become_proxy_authorization() -> None:
    fwd = forward_proxy("http://user:p%40ss@127.0.0.1:3128", True, "router.example")
    assert fwd is not None and (fwd.host, fwd.port) == ("127.0.0.1", 3128)
    assert fwd.target == "router.example:443"
    assert fwd.headers == {"Proxy-Authorization": "Basic dXNlcjpwQHNz"}
    assert forward_proxy(None, False, "h:1") is None


def test_the_openai_sdk_goes_through_the_proxy_it_is_given(
    tmp_path: Path, sim_pd: SimStack
) -> None:
    from servelab.io.http.sdk import SdkClient

    with running_tinyproxy(tmp_path / "fwd") as proxy:

        async def go() -> RequestRecord:
            body = b'{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4,'
            body += b'"stream":true}'
            record = RequestRecord(index=0, scheduled_ns=0)
            record.request_id = "sdk-through-proxy"
            async with SdkClient(
                sim_pd.router_url, idle_timeout_s=10, headers={}, proxy=proxy.url
            ) as c:
                await c.transfer("/v1/chat/completions", body, record)
            return record

        record = asyncio.run(go())
        assert record.error is None, record.error_detail
        assert f"POST {sim_pd.router_url}/v1/chat/completions" in proxy.log.read_text()
