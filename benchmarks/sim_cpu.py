"""The decode worker's own CPU, in process, without the router: its per-request pure work and
its step loop's per-token work, each in CPU time (``time.thread_time``, the fastest of
``--repeats``: other work on the machine does not count).

``request``: what a streamed chat request costs besides aiohttp and its sends, step by step (the
body's JSON, ``parse_request``, ``plan_output``, the response id, the start, token frame and
64 token chunks, the finish and usage events), on a 128-word body as the router sends it.
``step``: the scheduler's ``_emit`` over ``--batch`` sequences for 63 steps, each a real
``TokenWriter`` on a real asyncio transport over a Unix socket pair (a thread drains the other
ends), per token, beside a bare ``socket.send`` of the same count and size: the difference is the
step loop's Python per token. ``--socket tcp``: the pairs are loopback TCP connections (as the
router's), whose bare send is the kernel's floor per token: on loopback the sender's own call
also runs the receive side (the softirq up to the reader's socket and its wake-up);
``--congestion cubic`` (or any the machine allows) sets the writers' ``TCP_CONGESTION``.
A revision's source is measured by putting it first on the path::

    .venv/bin/python benchmarks/sim_cpu.py
    git archive c6f94ad4 src | tar -x -C /tmp/before
    PYTHONPATH=/tmp/before/src .venv/bin/python benchmarks/sim_cpu.py
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import selectors
import socket
import sys
import threading
import time
import timeit
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from aiohttp import HttpVersion11

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import free_port

import servelab
from servelab.sim.limits import CachedTokens
from servelab.sim.metrics import WorkerMetrics
from servelab.sim.protocol import GenItem, GenRequest, decode_body, parse_request
from servelab.sim.scheduler import DecodeScheduler, Sequence
from servelab.sim.settings import WorkerSettings
from servelab.sim.text import plan_output
from servelab.sim.tokenevent import token_frame
from servelab.sim.tokenstream import TokenWriter

try:  # where the stream's events live (servelab.sim.protocol before c6f94ad4's successor)
    from servelab.sim.tokenevent import stream_finish, stream_start, stream_usage
except ImportError:  # pragma: no cover - an older revision on the path
    from servelab.sim.protocol import (  # type: ignore[attr-defined,no-redef]
        stream_finish,
        stream_start,
        stream_usage,
    )

__all__ = ["main"]

_STEPS = 63  # a 64-token answer: the first token comes with the stream's start


def _cpu_us(fn: Callable[[], Any], number: int, repeats: int) -> float:
    timer = timeit.Timer(fn, timer=time.thread_time)
    return min(timer.repeat(number=number, repeat=repeats)) / number * 1e6


def _request_parts(repeats: int) -> dict[str, float]:
    rng = random.Random(1)
    words = " ".join(rng.choice(("alpha", "beta", "gamma,", "delta.", "the")) for _ in range(128))
    body = {
        "model": "simulated", "messages": [{"role": "user", "content": words}], "stream": True,
        "stream_options": {"include_usage": True}, "max_tokens": 64, "ignore_eos": True,
        "bootstrap_room": 1234567890123456789, "bootstrap_host": "127.0.0.1",
        "bootstrap_port": 18000,
    }  # fmt: skip
    raw = json.dumps(body).encode()
    decoded = decode_body(raw)
    parsed = parse_request("chat", decoded, "simulated")
    assert isinstance(parsed, GenRequest)
    req, item = parsed, parsed.items[0]
    out = plan_output(1, item.prompt, 64)
    rid = uuid.uuid4().hex
    frame = token_frame(req, item, out, rid, 1765000000)
    assert frame is not None
    parts: dict[str, Callable[[], Any]] = {
        "decode_body": lambda: decode_body(raw),
        "parse_request": lambda: parse_request("chat", decoded, "simulated"),
        "plan_output": lambda: plan_output(1, item.prompt, 64),
        "uuid4": lambda: uuid.uuid4().hex,
        "stream_start": lambda: stream_start(req, item, rid, 1765000000),
        "token_frame": lambda: token_frame(req, item, out, rid, 1765000000),
        "64 token chunks": lambda: frame.chunks(out.pieces, True),
        "stream_finish": lambda: stream_finish(req, item, out, 64, rid, 1765000000),
        "stream_usage": lambda: stream_usage(
            req, [64], rid, 1765000000, cached=0, report=CachedTokens.POSITIVE
        ),
    }
    return {name: _cpu_us(fn, 2000, repeats) for name, fn in parts.items()}


def _drain(socks: list[socket.socket], stop: threading.Event) -> None:
    sel = selectors.DefaultSelector()
    for sock in socks:
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ)
    while not stop.is_set():
        for key, _ in sel.select(0.05):
            with contextlib.suppress(BlockingIOError):
                key.fileobj.recv(1 << 16)  # type: ignore[union-attr]


def _tcp_pairs(n: int, congestion: str | None) -> list[tuple[socket.socket, socket.socket]]:
    """``n`` connected loopback TCP pairs (writer, reader), Nagle off as aiohttp has it, the
    writers on ``congestion`` control (None: the machine's default)."""
    with socket.create_server(("127.0.0.1", free_port()), backlog=n) as server:
        pairs = []
        for _ in range(n):
            a = socket.socket()
            if congestion is not None:
                a.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, congestion.encode())
            a.connect(server.getsockname())
            a.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pairs.append((a, server.accept()[0]))
    return pairs


async def _step(
    batch: int, repeats: int, kind: str, congestion: str | None = None
) -> tuple[float, float]:
    """(the step loop's CPU per token, a bare send's), µs, over ``kind`` sockets."""
    loop = asyncio.get_running_loop()
    if kind == "tcp":
        pairs = _tcp_pairs(batch, congestion)
    else:
        pairs = [socket.socketpair() for _ in range(batch)]
    stop = threading.Event()
    drainer = threading.Thread(target=_drain, args=([b for _, b in pairs], stop), daemon=True)
    drainer.start()
    try:
        transports = [
            (await loop.connect_accepted_socket(asyncio.Protocol, a))[0] for a, _ in pairs
        ]
        sched = DecodeScheduler(WorkerSettings(role="decode"), WorkerMetrics(), lambda: False)
        req = GenRequest("chat", "simulated", True, True, None, (), (), False)
        item = GenItem(0, "", 128, _STEPS + 1)
        emit, bare = [], []
        for rep in range(repeats):
            for i, transport in enumerate(transports):
                seq = Sequence(plan_output(rep, f"prompt {i} " * 20, _STEPS + 1), ctx_tokens=128)
                sched.join(seq)
                request = SimpleNamespace(transport=transport, version=HttpVersion11)
                writer = TokenWriter(request, req, item, seq, f"{i:032x}", 1765000000)  # type: ignore[arg-type]
                writer.take()
                seq.sink = writer
            sched._admit()
            t0 = time.thread_time()
            for _ in range(_STEPS):
                sched._emit()
            emit.append((time.thread_time() - t0) / (batch * _STEPS) * 1e6)
            data = b"x" * 190
            t0 = time.thread_time()
            for _ in range(_STEPS):
                for a, _b in pairs:
                    a.send(data)
            bare.append((time.thread_time() - t0) / (batch * _STEPS) * 1e6)
            await asyncio.sleep(0.05)  # the drainer empties the buffers
        return min(emit), min(bare)
    finally:
        stop.set()
        drainer.join(timeout=5)
        for a, b in pairs:
            a.close()
            b.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=256, help="step: sequences in the batch")
    p.add_argument("--repeats", type=int, default=7, help="the fastest of this many")
    p.add_argument("--socket", choices=("unix", "tcp"), default="unix", help="step: the pairs")
    p.add_argument("--congestion", default=None, help="tcp: the writers' congestion control")
    args = p.parse_args()
    print(f"servelab from {servelab.__file__}")
    parts = _request_parts(args.repeats)
    for name, us in parts.items():
        print(f"{us:8.2f} µs  {name}")
    print(f"{sum(parts.values()):8.2f} µs  a request's pure work, all of the above")
    emit, bare = asyncio.run(_step(args.batch, args.repeats, args.socket, args.congestion))
    kind = args.socket if args.congestion is None else f"{args.socket}, {args.congestion}"
    print(f"step loop at B={args.batch} ({kind}): {emit:.2f} µs a token, "
          f"a bare send {bare:.2f} µs: {emit - bare:.2f} µs of Python a token")  # fmt: skip


if __name__ == "__main__":
    main()
