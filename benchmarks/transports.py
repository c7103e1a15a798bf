"""Streaming transports side by side: which one the bench client keeps, measured.

Each candidate streams the same closed-loop load (C users, N requests, 64 tokens every 20 ms) from
the truth server (``benchmarks/peers/truth_server.py``, CPU 0) in a process of its own on CPU 1,
stamps every read with ``perf_counter_ns()``, and decodes every body with servelab's sans-I/O SSE
decoder after the run (as ``bench`` does). Printed per candidate: the client's CPU ms per output
token (``time.process_time`` over the run and the decode), delivered tokens/s as % of what the
server wrote in the same window, and gap p99 against the server's own.

Candidates:
- ``aiohttp``: ``ClientSession.post`` + ``content.readany()`` (servelab's client before this one);
- ``h1``: a raw ``asyncio.Protocol`` per connection, stamping in ``data_received``, servelab's own
  sans-I/O parser (:mod:`servelab.io.http.h1`): the kept one,
  :class:`servelab.io.http.stream.StreamClient`;
- ``httptools``: the same protocol with httptools' C parser (llhttp) and its ``on_body`` callback;
each on the default asyncio loop and on uvloop.

Usage: .venv/bin/python benchmarks/transports.py [--conc 256] [--requests 1280]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from time import perf_counter_ns
from typing import cast

import aiohttp
import httptools
import uvloop

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from peers import SERVER_CPU, free_port, start_truth, truth  # noqa: E402

from servelab.core.load import metrics  # noqa: E402
from servelab.core.load.records import RequestRecord, decode_chunks  # noqa: E402
from servelab.io.http.client import chat_body  # noqa: E402
from servelab.io.http.stream import StreamClient  # noqa: E402

LOOPS = ("asyncio", "uvloop")
CANDIDATES = [f"{t}/{loop}" for t in ("aiohttp", "httptools", "h1") for loop in LOOPS]
CLIENT_CPU = 1
OSL = 64
Chunks = list[tuple[int, bytes]]


# ------------------------------------------------------------------------------- candidates
class _HtConn(asyncio.Protocol):
    """httptools' parser behind a raw protocol: one request at a time."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.chunks: Chunks = []
        self.done: asyncio.Future[None] | None = None
        self.now = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.now = perf_counter_ns()
        self.parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        self.chunks.append((self.now, body))

    def on_message_complete(self) -> None:
        assert self.done is not None
        self.done.set_result(None)


async def _httptools_stream(pool: list[_HtConn], host: str, port: int, body: bytes) -> Chunks:
    loop = asyncio.get_running_loop()
    if pool:
        conn = pool.pop()
    else:
        _t, conn = await loop.create_connection(_HtConn, host, port)
    conn.chunks, conn.done = [], loop.create_future()
    conn.transport.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (host.encode(), len(body), body)
    )
    await conn.done
    pool.append(conn)
    return conn.chunks


async def _aiohttp_stream(session: aiohttp.ClientSession, url: str, body: bytes) -> Chunks:
    chunks: Chunks = []
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
        read = r.content.readany
        while True:
            data = await read()
            now = perf_counter_ns()
            if not data:
                return chunks
            chunks.append((now, data))


async def _drive(kind: str, url: str, conc: int, n: int) -> list[RequestRecord]:
    body = chat_body("truth", " ".join(["token"] * 128), OSL)
    host, port = "127.0.0.1", int(url.rsplit(":", 1)[1])
    captured: list[tuple[RequestRecord, Chunks]] = []
    queue = iter(range(n))
    connector = aiohttp.TCPConnector(limit=conc)
    session = aiohttp.ClientSession(connector=connector, auto_decompress=False)
    pool: list[_HtConn] = []

    async def user(client: StreamClient) -> None:
        for i in queue:
            record = RequestRecord(i, perf_counter_ns())
            record.sent_ns = record.scheduled_ns
            if kind == "h1":
                chunks: Chunks = []
                await client.stream("/v1/chat/completions", body, record, raw=chunks)
            elif kind == "aiohttp":
                chunks = await _aiohttp_stream(session, url + "/v1/chat/completions", body)
            else:
                chunks = await _httptools_stream(pool, host, port, body)
            record.end_ns = perf_counter_ns()
            captured.append((record, chunks))

    async with StreamClient(url, concurrency=conc) as client:
        await asyncio.gather(*(user(client) for _ in range(conc)))
    await session.close()
    for record, chunks in captured:
        record.error = None
        decode_chunks(record, chunks, record.end_ns or 0)
    return [r for r, _ in captured]


def child(kind: str, loop: str, url: str, conc: int, n: int) -> None:
    """One candidate's run: JSON on stdout."""
    runner = asyncio.Runner(loop_factory=uvloop.new_event_loop if loop == "uvloop" else None)
    with runner:
        runner.run(_drive(kind, url, max(conc // 8, 1), conc))  # warm-up, connections opened
        truth(url, reset=True)  # the server's count starts with the measured run
        cpu0, t0 = time.process_time(), perf_counter_ns()
        records = runner.run(_drive(kind, url, conc, n))
        cpu, t1 = time.process_time() - cpu0, perf_counter_ns()
    tokens = sum(r.output_tokens for r in records)
    gaps = sorted(g for r in records for g in metrics.gaps_ns(r))
    print(
        json.dumps(
            {
                "cpu_ms_per_token": cpu / max(tokens, 1) * 1e3,
                "tokens": tokens,
                "t0": t0,
                "t1": t1,
                "gap_p99_ms": gaps[int(len(gaps) * 0.99)] / 1e6 if gaps else None,
                "failed": sum(not r.ok for r in records),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conc", type=int, default=256)
    parser.add_argument("--requests", type=int, default=1280)
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--url", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, loop = args.child.split("/")
        child(kind, loop, args.url, args.conc, args.requests)
        return
    port = free_port()
    server = start_truth(port, 20.0, 50.0, SERVER_CPU)
    url = f"http://127.0.0.1:{port}"
    print("| transport / loop | CPU ms/token | delivered % of served | gap p99 ms (truth) | load |")
    print("|---|---:|---:|---:|---:|")
    sizes = ["--conc", str(args.conc), "--requests", str(args.requests)]
    try:
        for name in args.candidates.split(","):
            load = os.getloadavg()[0]
            out = subprocess.run(
                [sys.executable, __file__, "--child", name, "--url", url, *sizes],
                capture_output=True,
                text=True,
                check=True,
                preexec_fn=lambda: os.sched_setaffinity(0, {CLIENT_CPU}),
            )
            res, served = json.loads(out.stdout), truth(url)
            pct = res["tokens"] / served["tokens"] * 100
            print(
                f"| {name} | {res['cpu_ms_per_token']:.4f} | {pct:.1f}% | "
                f"{res['gap_p99_ms']:.2f} ({served['gap_ms']['p99']:.2f}) | {load:.2f} |",
                flush=True,
            )
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
