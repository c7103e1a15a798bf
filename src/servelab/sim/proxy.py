"""A faulty HTTP/1.1 reverse proxy: the reference incident's real root cause.

It forwards every request to ``upstream`` and streams the response back chunk by chunk. With
``stall_reused_after=N`` it stops forwarding on a client connection that has already carried N
requests (keep-alive reuse): the request is accepted and never answered, while fresh connections
keep working. It can also buffer whole responses, cut them after N bytes, or delay every chunk
(:mod:`servelab.sim.proxyfaults`). ``GET|POST /_servelab/faults`` (only with ``admin`` on a
loopback bind) reads or changes the switches at run time.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from servelab.errors import SimError
from servelab.sim.proxyfaults import ProxyFaults
from servelab.sim.settings import is_loopback

__all__ = ["PROXY_KEY", "ProxyState", "make_proxy_app", "serve_proxy"]

_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


@dataclass
class ProxyState:
    """The proxy's fault switches (:class:`ProxyFaults`) and counters."""

    upstream: str
    faults: ProxyFaults = field(default_factory=ProxyFaults)
    forwarded: int = 0
    stalled: int = 0
    buffered: int = 0
    cut: int = 0
    per_connection: weakref.WeakKeyDictionary[Any, int] = field(
        default_factory=weakref.WeakKeyDictionary
    )

    @property
    def stall_reused_after(self) -> int | None:
        """The reused-connection stall in effect (None: off)."""
        return self.faults.stall_reused_after

    def count(self, conn: Any) -> int:
        """Count one request on ``conn``; returns how many it carried BEFORE this one."""
        before = self.per_connection.get(conn, 0)
        self.per_connection[conn] = before + 1
        return before

    def stalls(self, carried_before: int) -> bool:
        """Whether a request on a connection that already carried that many is stalled."""
        return self.faults.stalls(carried_before)

    def as_json(self) -> dict[str, Any]:
        """The admin view: the upstream, every switch, the counters."""
        return {
            "upstream": self.upstream,
            **self.faults.as_json(),
            "forwarded": self.forwarded,
            "stalled": self.stalled,
            "buffered": self.buffered,
            "cut": self.cut,
        }


PROXY_KEY = web.AppKey("proxy", ProxyState)
_SESSION_KEY = web.AppKey("proxy_session", aiohttp.ClientSession)


async def _stall(request: web.Request) -> web.StreamResponse:
    """Accept the request and never answer, until the client gives up."""
    while True:
        transport = request.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("client closed a stalled connection")
        await asyncio.sleep(0.25)


class _Body:
    """Writes a response body under the faults in force when the response began."""

    def __init__(self, request: web.Request, resp: web.StreamResponse, state: ProxyState) -> None:
        self.request, self.resp, self.state = request, resp, state
        self.faults = state.faults
        self.sent = 0

    async def write(self, chunk: bytes) -> bool:
        """One chunk: delayed, and cut (the connection closed, False) where the budget ends."""
        if self.faults.chunk_delay_ms > 0:
            await asyncio.sleep(self.faults.chunk_delay_ms / 1000)
        cut = self.faults.cut_after_bytes
        if cut is not None and self.sent + len(chunk) > cut:
            await self.resp.write(chunk[: cut - self.sent])
            self.state.cut += 1
            transport = self.request.transport
            if transport is not None:
                transport.close()  # flushes what was written, then closes: mid-body
            return False
        await self.resp.write(chunk)
        self.sent += len(chunk)
        return True


async def _relay(
    request: web.Request, resp: web.StreamResponse, up: aiohttp.ClientResponse, state: ProxyState
) -> bool:
    """Forward the upstream body: chunk by chunk, or (``buffer``) whole once it finished.
    False when the body was cut (the connection is closing: no end of body may follow)."""
    body = _Body(request, resp, state)
    if body.faults.buffer:
        whole = await up.read()
        state.buffered += 1
        resp.content_length = len(whole)
        await resp.prepare(request)
        return await body.write(whole)
    await resp.prepare(request)
    async for chunk in up.content.iter_any():
        if not await body.write(chunk):
            return False
    return True


async def _forward(request: web.Request) -> web.StreamResponse:
    state = request.app[PROXY_KEY]
    if state.stalls(state.count(request.transport)):
        state.stalled += 1
        return await _stall(request)
    state.forwarded += 1
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
    body = await request.read()
    url = state.upstream.rstrip("/") + request.rel_url.path_qs
    session = request.app[_SESSION_KEY]
    try:
        async with session.request(request.method, url, headers=headers, data=body) as up:
            resp = web.StreamResponse(status=up.status, reason=up.reason)
            for key, value in up.headers.items():
                if key.lower() not in _HOP_BY_HOP:
                    resp.headers.add(key, value)
            if await _relay(request, resp, up, state):
                await resp.write_eof()
            return resp
    except aiohttp.ClientError as exc:
        body_json = {"error": {"message": f"upstream error: {exc}", "type": "bad_gateway"}}
        return web.json_response(body_json, status=502)


async def _faults(request: web.Request) -> web.Response:
    state = request.app[PROXY_KEY]
    if request.method == "POST":
        try:
            changes = await request.json()
            if not isinstance(changes, dict):
                raise SimError("the body must be a JSON object")
            state.faults = state.faults.updated(changes)
        except (ValueError, SimError) as exc:
            return web.json_response({"error": {"message": f"bad body: {exc}"}}, status=400)
    return web.json_response(state.as_json())


def make_proxy_app(
    upstream: str, *, faults: ProxyFaults | None = None, admin: bool = False
) -> web.Application:
    """The proxy app; its upstream client session opens and closes with the app."""
    app = web.Application(client_max_size=64 * 1024**2)
    app[PROXY_KEY] = ProxyState(upstream, faults or ProxyFaults())

    async def session_ctx(a: web.Application) -> Any:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        connector = aiohttp.TCPConnector(limit=0)
        a[_SESSION_KEY] = aiohttp.ClientSession(timeout=timeout, connector=connector)
        yield
        await a[_SESSION_KEY].close()

    app.cleanup_ctx.append(session_ctx)
    if admin:
        app.router.add_route("GET", "/_servelab/faults", _faults)
        app.router.add_route("POST", "/_servelab/faults", _faults)
    app.router.add_route("*", "/{tail:.*}", _forward)
    return app


async def serve_proxy(
    host: str,
    port: int,
    upstream: str,
    stop: asyncio.Event,
    *,
    faults: ProxyFaults | None = None,
    admin: bool = False,
) -> None:
    """Run the proxy until ``stop`` is set."""
    if admin and not is_loopback(host):
        raise SimError("--admin is only allowed on a loopback bind")
    app = make_proxy_app(upstream, faults=faults, admin=admin)
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    try:
        try:
            await web.TCPSite(runner, host, port, backlog=1024).start()
        except OSError as exc:
            raise SimError(f"cannot listen on {host}:{port}: {exc}") from exc
        await stop.wait()
    finally:
        await runner.cleanup()
