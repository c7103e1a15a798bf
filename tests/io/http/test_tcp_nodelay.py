"""Where the ~40 ms ``return`` phase comes from (docs/bench.md, "Traces"): Nagle's algorithm on
the real sglang-router 0.3.2's client connections meeting the client's delayed ACK. servelab's
client and the simulated workers turn Nagle off on their sockets; the router does not on the
sockets it accepts, so on a kept-alive connection its first SSE chunk after the response head
waits for the client's ACK (Linux delays it by tens of ms: 40 here, 20 on CI's kernel). Forcing
``TCP_NODELAY`` on the router's own socket (through a duplicate of its descriptor) removes the
delay: the cause is that option, not the engines. The first request of a connection is quick
(Linux ACKs at once while a connection is young), so only kept-alive requests show it."""

from __future__ import annotations

import json
import os
import socket
import statistics
import time
from collections.abc import Iterator

import pytest

from servelab.io.http.stream import StreamClient
from tests.support.sockets import nodelay, tcp_sockets
from tests.support.stack import SimStack, sim_stack

#: Kept-alive requests per series (after each series' first, which is not counted).
REQUESTS = 8
#: A Nagle-held chunk waits for the client's delayed ACK: about 40 ms on this machine's kernel,
#: 20 ms read on CI's (the delay is the kernel's, not ours), load only adds to it. Without Nagle
#: the chunk follows the head in well under a millisecond: the held wait must be at least
#: HELD_MS and FREE_RATIO times the free one, which leaves a busy machine's scheduling room.
HELD_MS = 10.0
FREE_RATIO = 4.0


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    with sim_stack(time_scale=0.2) as st:
        yield st


def _request() -> bytes:
    body = json.dumps(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hello " * 50}],
            "stream": True,
            "max_tokens": 4,
        }
    ).encode()
    head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


def _head_to_first_token_ms(conn: socket.socket) -> float:
    """One streamed request on ``conn``: ms from its response head to its first token's bytes."""
    conn.sendall(_request())
    buf, head_at, first_at = b"", None, None
    while not (buf.endswith(b"0\r\n\r\n") and b"[DONE]" in buf):
        data = conn.recv(65536)
        assert data, "the router closed the connection"
        now, buf = time.perf_counter(), buf + data
        _, sep, body = buf.partition(b"\r\n\r\n")
        if sep and head_at is None:
            head_at = now
        if first_at is None and b'"content"' in body:
            first_at = now
    assert head_at is not None and first_at is not None
    return (first_at - head_at) * 1e3


def _kept_alive_ms(conn: socket.socket) -> float:
    """The median head-to-first-token time of REQUESTS kept-alive requests on ``conn``."""
    _head_to_first_token_ms(conn)
    return statistics.median(_head_to_first_token_ms(conn) for _ in range(REQUESTS))


def _accepted_by(stack: SimStack, name: str, port: int, peer: tuple[str, int]) -> socket.socket:
    with tcp_sockets(stack.procs[name].pid) as socks:
        for sock in socks:
            if sock.getsockname()[1] == port and sock.getpeername() == peer:
                return sock.dup()
    raise AssertionError(f"{name} holds no connection from {peer}")


def test_the_router_nagles_its_client_connections_and_that_is_the_return_phase(
    stack: SimStack,
) -> None:
    with socket.create_connection(("127.0.0.1", stack.router_port)) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        held = _kept_alive_ms(conn)
        with _accepted_by(stack, "router", stack.router_port, conn.getsockname()) as theirs:
            assert not nodelay(theirs)  # sglang-router 0.3.2 leaves Nagle on
            theirs.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            free = _kept_alive_ms(conn)
    print(f"head -> first token, kept alive: router as is {held:.1f} ms, NODELAY {free:.1f} ms")
    assert held >= HELD_MS and held >= FREE_RATIO * free, (held, free)


def test_the_simulated_decode_turns_nagle_off_on_the_routers_connections(
    stack: SimStack,
) -> None:
    with socket.create_connection(("127.0.0.1", stack.router_port)) as conn:
        _head_to_first_token_ms(conn)  # the router now holds a connection to each worker
    with tcp_sockets(stack.procs["decode"].pid) as socks:
        accepted = [s for s in socks if s.getsockname()[1] == stack.decode_port]
        assert accepted and all(nodelay(s) for s in accepted)


async def test_servelabs_client_turns_nagle_off() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        async with StreamClient(f"http://127.0.0.1:{port}", concurrency=1) as client:
            assert len(await client.connect(1)) == 1
            with tcp_sockets(os.getpid()) as socks:
                # (the descriptor the transport holds, and any duplicate the event loop keeps)
                mine = [s for s in socks if s.getpeername() == ("127.0.0.1", port)]
                assert mine and all(nodelay(s) for s in mine)
