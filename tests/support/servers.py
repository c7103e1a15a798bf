"""Small real aiohttp servers for tests, on free loopback ports.

``streaming_app()`` answers OpenAI-style chat streams (and faulty ones at ``/stall``, ``/fail``,
``/malformed``), and counts in ``app[SEEN]`` the streams it has begun (tests wait on that, not on
a sleep); :func:`serve` starts any app and returns its runner and base URL; :func:`served` is the
same as an async context manager that always cleans up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import web

from tests.support import free_port

__all__ = ["MODEL", "SEEN", "Seen", "answering_app", "serve", "served", "streaming_app"]

#: The model id ``streaming_app`` lists at ``/v1/models``.
MODEL = "sim-model"
GAP_S = web.AppKey("gap_s", float)


@dataclass
class Seen:
    """What a :func:`streaming_app` has served so far."""

    streams: int = 0  # chat streams begun (their first chunk written)


SEEN = web.AppKey("seen", Seen)


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
    request.app[SEEN].streams += 1
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


def answering_app(status: int, body: str, content_type: str) -> web.Application:
    """Every request, any method and path, answered ``status`` with ``body`` at once."""

    async def answer(_request: web.Request) -> web.Response:
        return web.Response(status=status, text=body, content_type=content_type)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    return app


def streaming_app(gap_s: float = 0.002) -> web.Application:
    """Chat streams at ``/v1/...``; faulty ones at ``/stall``, ``/fail``, ``/malformed``."""
    app = web.Application()
    app[GAP_S] = gap_s
    app[SEEN] = Seen()
    app.router.add_post("/v1/chat/completions", _stream)
    app.router.add_get("/v1/models", _models)
    app.router.add_post("/stall", _stall)
    app.router.add_post("/fail", _fail)
    app.router.add_post("/malformed", _malformed)
    return app


async def serve(app: web.Application, port: int | None = None) -> tuple[web.AppRunner, str]:
    """Start ``app`` on loopback ``port`` (None: a free one); return the runner and the base
    URL."""
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    port = free_port() if port is None else port
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, f"http://127.0.0.1:{port}"


@contextlib.asynccontextmanager
async def served(app: web.Application, port: int | None = None) -> AsyncIterator[str]:
    """:func:`serve` as a context manager: yields the base URL, cleans the runner up after."""
    runner, url = await serve(app, port)
    try:
        yield url
    finally:
        await runner.cleanup()
