"""What aiohttp costs a simulated worker per request, against a bare ``asyncio.Protocol``.

Each server answers the same streamed request (a 128-word chat body) with the same bytes in the
same two ``send``s (the head, the stream's start; then its end and the last chunk), the way the
decode worker answers one (``servelab.sim.respond``: the head with the first events, the end in
one write), and counts its own CPU (``os.times``) over a fixed number of requests. ``aiohttp``
is the worker's way (an app, its router, ``request.read``, a ``StreamResponse``), ``lowlevel``
aiohttp's low-level server (no app, no router), ``raw`` a protocol that parses the request line,
the headers and a ``Content-Length`` body itself. The client, in another process, keeps
``--conns`` connections busy, ``--per-conn`` requests each (bounded in count and by a timeout).
The difference is what a raw path for the generate routes could save per request (divided by
the tokens of an answer: per token)::

    .venv/bin/python benchmarks/http_floor.py --requests 20000 --conns 100 --repeats 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from email.utils import formatdate
from pathlib import Path
from typing import Any

__all__ = ["main"]

START = (
    b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,'
    b'"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
)
END = (
    b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},'
    b'"finish_reason":"length"}]}\n\ndata: [DONE]\n\n'
)
MODES = ("aiohttp", "lowlevel", "raw")
TIMEOUT_S = 300


class _Count:
    def __init__(self, n: int) -> None:
        self.n, self.done = n, 0
        self.stop = asyncio.Event()

    def __call__(self) -> None:
        self.done += 1
        if self.done >= self.n:
            self.stop.set()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


class _Raw(asyncio.Protocol):
    """One connection: a request line, headers and a ``Content-Length`` body at a time."""

    def __init__(self, count: _Count) -> None:
        self.count = count
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (i := self.buf.find(b"\r\n\r\n")) >= 0:
            n = 0
            for line in self.buf[:i].split(b"\r\n")[1:]:
                key, _, value = line.partition(b":")
                if key.strip().lower() == b"content-length":
                    n = int(value)
            if len(self.buf) < i + 4 + n:
                return
            json.loads(self.buf[i + 4 : i + 4 + n])
            self.buf = self.buf[i + 4 + n :]
            head = (
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                b"Transfer-Encoding: chunked\r\nDate: %b\r\nServer: Python/3 aiohttp/3\r\n\r\n"
            ) % formatdate(usegmt=True).encode()
            assert self.transport is not None
            self.transport.write(head + _chunk(START))
            asyncio.get_running_loop().call_soon(self.end)

    def end(self) -> None:
        assert self.transport is not None
        self.transport.write(_chunk(END) + b"0\r\n\r\n")
        self.count()


async def _serve(mode: str, port: int, n: int) -> None:
    from aiohttp import web

    count = _Count(n)

    class EventStream(web.StreamResponse):
        _send_headers_immediately = False  # as servelab.sim.respond's

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        json.loads(await request.read())
        resp = EventStream(headers={"Content-Type": "text/event-stream"})
        resp.headers["Cache-Control"] = "no-cache"
        await resp.prepare(request)
        await resp.write(START)
        await resp.write_eof(END)
        count()
        return resp

    runner: Any = None
    server: asyncio.Server | None = None
    if mode == "raw":
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _Raw(count), "127.0.0.1", port, backlog=1024)
    else:
        if mode == "lowlevel":
            low = web.Server(handler, access_log=None, handler_cancellation=False)
            runner = web.ServerRunner(low)
        else:
            app = web.Application()
            app.router.add_post("/v1/chat/completions", handler)
            runner = web.AppRunner(app, access_log=None, handler_cancellation=False)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, backlog=1024).start()
    print("ready", flush=True)
    before = os.times()
    await asyncio.wait_for(count.stop.wait(), TIMEOUT_S)
    after = os.times()
    user, system = after.user - before.user, after.system - before.system
    print(json.dumps({"mode": mode, "user_us": user / n * 1e6, "sys_us": system / n * 1e6}))
    if server is not None:
        server.close()
    if runner is not None:
        await runner.cleanup()


async def _drive(port: int, conns: int, per_conn: int) -> None:
    prompt = " ".join(f"w{k}" for k in range(128))
    body = {"model": "sim", "messages": [{"role": "user", "content": prompt}], "stream": True}
    data = json.dumps({**body, "max_tokens": 64}).encode()
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%b"
    ) % (len(data), data)

    async def one() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(per_conn):
            writer.write(request)
            got = b""
            while not got.endswith(b"0\r\n\r\n"):
                more = await reader.read(65536)
                if not more:
                    raise ConnectionError("the server closed the connection")
                got += more
        writer.close()

    await asyncio.wait_for(asyncio.gather(*(one() for _ in range(conns))), TIMEOUT_S)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(mode: str, conns: int, per_conn: int) -> dict[str, float]:
    port = _free_port()
    me = [sys.executable, str(Path(__file__).resolve())]
    n = conns * per_conn
    server = subprocess.Popen(
        [*me, "--serve", mode, "--port", str(port), "--requests", str(n)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        if server.stdout.readline().strip() != "ready":
            raise SystemExit(f"the {mode} server did not start")
        client = [*me, "--drive", "--port", str(port), "--conns", str(conns)]
        subprocess.run([*client, "--per-conn", str(per_conn)], check=True, timeout=TIMEOUT_S)
        result: dict[str, float] = json.loads(server.stdout.readline())
        return result
    finally:
        server.kill()
        server.wait(10)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=20_000, help="requests per server run")
    p.add_argument("--conns", type=int, default=100, help="client connections")
    p.add_argument("--repeats", type=int, default=2, help="runs of each mode, alternated")
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument("--serve", choices=MODES, help=argparse.SUPPRESS)
    p.add_argument("--drive", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--per-conn", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        asyncio.run(_serve(args.serve, args.port, args.requests))
        return 0
    if args.drive:
        asyncio.run(_drive(args.port, args.conns, args.per_conn))
        return 0
    per_conn = max(1, args.requests // args.conns)
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in args.modes}
    for _ in range(args.repeats):
        for mode in args.modes:
            runs[mode].append(_run(mode, args.conns, per_conn))
    print(f"{args.conns * per_conn} requests a run, {args.conns} connections; load {_load()}")
    print(f"{'mode':>9} {'user µs/request':>16} {'system':>8} {'total':>8}   (each run)")
    for mode, rs in runs.items():
        user = sum(r["user_us"] for r in rs) / len(rs)
        system = sum(r["sys_us"] for r in rs) / len(rs)
        each = ", ".join(f"{r['user_us'] + r['sys_us']:.0f}" for r in rs)
        print(f"{mode:>9} {user:16.1f} {system:8.1f} {user + system:8.1f}   ({each})")
    return 0


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())
