"""How the streaming client reaches its target: straight, or through a forward proxy, as httpx
goes through one.

An ``http://`` target is asked for in the absolute form (``POST http://HOST:PORT/path``) on a
connection to the proxy; an ``https://`` one through a ``CONNECT HOST:PORT`` tunnel, TLS then
spoken inside it. A proxy URL's user and password become ``Proxy-Authorization: Basic``.
Which proxy (if any) is decided by :func:`servelab.core.load.proxyroute.route`.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import unquote, urlsplit

from servelab.core.load.proxyroute import parse_proxy

__all__ = ["ForwardProxy", "Via", "forward_proxy", "via"]

_HEAD_MAX = 16 * 1024
P = TypeVar("P", bound=asyncio.BaseProtocol)


@dataclass(frozen=True)
class ForwardProxy:
    """Where the proxy listens, the headers it is sent, and the target a tunnel opens to."""

    host: str
    port: int
    target: str  # HOST:PORT of the target (a tunnel's CONNECT)
    headers: dict[str, str] = field(default_factory=dict)

    async def tunnel(self, loop: asyncio.AbstractEventLoop) -> socket.socket:
        """A socket to the proxy with a ``CONNECT`` tunnel to the target open on it; OSError
        (ConnectionError) when the proxy refuses it."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, (self.host, self.port))
            lines = [f"CONNECT {self.target} HTTP/1.1", f"Host: {self.target}"]
            lines += [f"{name}: {value}" for name, value in self.headers.items()]
            await loop.sock_sendall(sock, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            head = await _head(loop, sock)
        except BaseException:
            sock.close()
            raise
        status = head.split(b" ", 2)[1:2]
        if status != [b"200"]:
            sock.close()
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            raise ConnectionRefusedError(f"the forward proxy refused the tunnel: {line}")
        return sock


async def _head(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> bytes:
    """The proxy's answer to CONNECT, up to its blank line (nothing after it is read: a 200
    answer has no body)."""
    got = b""
    while b"\r\n\r\n" not in got:
        byte = await loop.sock_recv(sock, 1)
        if not byte:
            raise ConnectionResetError("the forward proxy closed the tunnel before answering")
        got += byte
        if len(got) > _HEAD_MAX:
            raise ConnectionError("the forward proxy's answer to CONNECT has no end")
    return got


def forward_proxy(url: str | None, tls: bool, target: str) -> ForwardProxy | None:
    """The proxy at ``url`` for requests to ``target`` (``HOST:PORT``; None: no proxy)."""
    if url is None:
        return None
    parts = urlsplit(parse_proxy(url))
    headers = {}
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers["Proxy-Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    if tls and ":" not in target.rsplit("]", 1)[-1]:
        target += ":443"
    return ForwardProxy(parts.hostname or "", parts.port or 80, target, headers)


@dataclass(frozen=True)
class Via:
    """The way to a target: where connections go, the request target's start (the path, or the
    absolute form through a proxy), and the headers a forward proxy is sent with each request."""

    host: str
    port: int
    tls: bool
    authority: str  # HOST:PORT, the Host header
    prefix: str
    proxy: ForwardProxy | None = None

    @property
    def headers(self) -> dict[str, str]:
        """``Proxy-Authorization`` on each request through a proxy in the absolute form."""
        return {} if self.proxy is None or self.tls else self.proxy.headers

    async def open(
        self, loop: asyncio.AbstractEventLoop, factory: Callable[[], P]
    ) -> tuple[asyncio.BaseTransport, P]:
        """A new connection: to the target, to the proxy (absolute form), or TLS inside a
        ``CONNECT`` tunnel."""
        tls = ssl.create_default_context() if self.tls else None
        if self.proxy is None:
            return await loop.create_connection(factory, self.host, self.port, ssl=tls)
        if tls is None:
            return await loop.create_connection(factory, self.proxy.host, self.proxy.port)
        sock = await self.proxy.tunnel(loop)
        return await loop.create_connection(factory, sock=sock, ssl=tls, server_hostname=self.host)


def via(base_url: str, proxy: str | None) -> Via:
    """The way to ``base_url`` (through ``proxy``, if given)."""
    url = urlsplit(base_url)
    host, tls = url.hostname or "127.0.0.1", url.scheme == "https"
    authority = url.netloc.rpartition("@")[2]
    fwd = forward_proxy(proxy, tls, authority)
    prefix = f"http://{authority}{url.path}" if fwd is not None and not tls else url.path
    return Via(host, url.port or (443 if tls else 80), tls, authority, prefix, fwd)
