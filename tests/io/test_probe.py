"""HTTP probes against a real loopback aiohttp server: answers, refusals, timeouts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from servelab.io import probe as probe_module
from servelab.io.probe import BODY_LIMIT, probe
from tests.support import free_port
from tests.support.servers import served


@pytest.fixture
async def server() -> AsyncIterator[str]:
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


async def test_http_error_status_is_an_answer(server: str) -> None:
    result = await probe(server + "/health", timeout=5)
    assert result.status == 503 and not result.ok and result.error is None
    assert '"starting"' in result.body
    assert result.describe().startswith("HTTP 503")
    assert result.to_json()["status"] == 503


async def test_body_is_truncated(server: str) -> None:
    result = await probe(server + "/big", timeout=5)
    assert result.ok and len(result.body) == BODY_LIMIT


async def test_body_limit_is_chosen_or_lifted(server: str) -> None:
    short = await probe(server + "/big", timeout=5, body_limit=10)
    assert short.ok and short.body == "x" * 10
    whole = await probe(server + "/big", timeout=5, body_limit=None)
    assert whole.ok and whole.body == "x" * 5000


async def test_post_json(server: str) -> None:
    result = await probe(server + "/echo", timeout=5, method="POST", json_body={"a": 1})
    assert result.status == 200 and result.body == '{"a": 1}'


async def test_refused_is_reported_not_raised() -> None:
    url = f"http://127.0.0.1:{free_port()}/health"
    result = await probe(url, timeout=5)
    assert result.status is None and result.error and "Connect" in result.error
    assert result.describe().startswith("no answer:")


async def test_timeout_is_reported(server: str) -> None:
    result = await probe(server + "/slow", timeout=0.3)
    assert result.status is None and "timed out" in (result.error or "")
    assert 0.25 < result.elapsed_s < 1.4


async def test_bad_url_is_reported() -> None:
    result = await probe("not-a-url", timeout=1)
    assert result.status is None and result.error


def test_public_api() -> None:
    assert set(probe_module.__all__) == {"BODY_LIMIT", "ProbeResult", "probe"}
