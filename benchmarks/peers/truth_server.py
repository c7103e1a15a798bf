"""A streaming "truth" server for client benchmarks: raw asyncio, HTTP/1.1 keep-alive, chunked SSE.

Every chat completion answers at once with the headers and an empty role chunk, writes its first
content token ``--prefill-ms`` after the request arrived, then one token every ``--gap-ms`` on an
ABSOLUTE schedule (token k at first + k·gap, whatever the previous write's lateness), then a usage
chunk and ``data: [DONE]``. It records its own write times (``perf_counter_ns``) as the truth:

    GET  /truth        → JSON: ttft and per-gap percentiles, tokens written, window, server CPU
    GET  /truth?last=N → the same over the last N requests to arrive (a client's measured ones)
    POST /truth/reset  → forget everything recorded so far
    GET  /v1/models    → one model, "truth"; GET /health → 200 (guidellm checks it)

A request's arrival is the kernel's receive time (``SO_TIMESTAMPNS`` on every connection, read
with ``recvmsg``: the time the request's last segment reached the server's socket), not the
moment the server's loop got to it: on loopback that is the client's write, so a request waiting
in its socket while the server is busy with a burst of others counts in the server's own TTFT
(``socket_wait_ms``: read - kernel arrival; where the kernel gives no stamp, the read is the
arrival, counted in ``unstamped``). The first token is scheduled from that arrival. It keeps its
schedule cheaply (one core): uvloop when installed, every byte it writes precomputed (the token
chunks and, per output length, the closing chunk), one ``call_at`` per token, written straight
to the socket (buffered only if the socket is full). How late each write was against its
schedule is recorded too (``late_ms``): the judge of whether the server itself held the schedule
at a level.

Usage: python truth_server.py --port P [--prefill-ms 50] [--gap-ms 20]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import socket
import struct
import time
from functools import cache
from time import perf_counter_ns

try:
    import uvloop
except ImportError:  # pragma: no cover - the project venv has it
    uvloop = None  # type: ignore[assignment]

WORDS = ("kernel", "router", "decode", "prefill", "cache", "token", "batch", "engine")
GAP_S = 0.02
PREFILL_S = 0.05


class Truth:
    """What the server actually did, in its own clock: one entry per request."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.streams: list[Stream] = []
        gc.collect()  # between clients, never while one is measured (see main)
        self.cpu0 = time.process_time()

    def summary(self, last: int | None = None) -> dict[str, object]:
        """Over the ``last`` requests to arrive (all: None): what the server wrote, and when."""
        streams = self.streams[-last:] if last else self.streams
        if not streams:
            return {"requests": 0, "tokens": 0}
        first = min(s.arrival_ns for s in streams)
        end = max(s.last_ns for s in streams)
        tokens = sum(s.written for s in streams)
        return {
            "requests": len(streams),
            "tokens": tokens,
            "served_tok_s": tokens / max(end - first, 1) * 1e9,
            "ttft_ms": _pcts([s.ttft_ns for s in streams if s.written]),
            "gap_ms": _pcts([g for s in streams for g in s.gaps_ns]),
            "late_ms": _pcts([x for s in streams for x in s.late_ns]),
            "socket_wait_ms": _pcts([s.wait_ns for s in streams if s.wait_ns is not None]),
            "unstamped": sum(s.wait_ns is None for s in streams),
            "first_arrival_ns": first,
            "last_write_ns": end,
            "server_cpu_s": time.process_time() - self.cpu0,
        }


def _pcts(values: list[int]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}

    def pct(q: float) -> float:
        pos = (len(ordered) - 1) * q / 100
        lo = int(pos)
        hi = min(lo + 1, len(ordered) - 1)
        return (ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)) / 1e6

    return {"n": len(ordered), "p50": pct(50), "p90": pct(90), "p99": pct(99), "max": pct(100)}


TRUTH = Truth()


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(obj: object) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _delta(content: str, role: bool = False) -> bytes:
    delta = {"role": "assistant", "content": content} if role else {"content": content}
    return _event(
        {
            "id": "t",
            "object": "chat.completion.chunk",
            "model": "truth",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
        }
    )


TOKEN_CHUNKS = [_chunk(_delta(" " + w)) for w in WORDS]
HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
)
HEAD_AND_ROLE = HEAD + _chunk(_delta("", role=True))


def _json_response(obj: object) -> bytes:
    body = json.dumps(obj).encode()
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )


@cache
def _tail(prompt_tokens: int, n: int) -> bytes:
    """The finish chunk, the usage chunk, [DONE] and the chunked terminator (made once per n)."""
    total = prompt_tokens + n
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": total}
    base = {"id": "t", "object": "chat.completion.chunk", "model": "truth"}
    tail = _event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
    tail += _event({**base, "choices": [], "usage": usage}) + b"data: [DONE]\n\n"
    return _chunk(tail) + b"0\r\n\r\n"


class Stream:
    """One response on an absolute schedule, driven by loop.call_at callbacks (no task)."""

    def __init__(self, conn: Conn, n: int, prompt_tokens: int, arrival: Arrival) -> None:
        self.conn, self.n, self.prompt_tokens = conn, n, prompt_tokens
        self.arrival_ns = arrival.ns  # the kernel's receive time of the request's last bytes
        self.wait_ns = arrival.wait_ns
        self.last_ns = 0
        self.ttft_ns = 0
        self.written = 0
        self.gaps_ns: list[int] = []
        self.late_ns: list[int] = []
        loop = asyncio.get_running_loop()
        conn.write(HEAD_AND_ROLE)
        self.t_first = arrival.loop_t + PREFILL_S
        loop.call_at(self.t_first, self.tick, 0)
        TRUTH.streams.append(self)

    def tick(self, k: int) -> None:
        conn = self.conn
        if conn.closed:
            return
        last = k == self.n - 1
        loop = asyncio.get_running_loop()
        late = loop.time() - (self.t_first + k * GAP_S)
        if last:
            conn.write(TOKEN_CHUNKS[k % len(TOKEN_CHUNKS)] + _tail(self.prompt_tokens, self.n))
        else:
            conn.write(TOKEN_CHUNKS[k % len(TOKEN_CHUNKS)])
        now = perf_counter_ns()
        if k == 0:
            self.ttft_ns = now - self.arrival_ns
        else:
            self.gaps_ns.append(now - self.last_ns)
        self.late_ns.append(round(late * 1e9))
        self.last_ns = now
        self.written += 1
        if not last:
            loop.call_at(self.t_first + (k + 1) * GAP_S, self.tick, k + 1)


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; SCM_TIMESTAMPNS is the same
ANCILLARY = socket.CMSG_SPACE(16)  # one struct timespec


class Arrival:
    """When a request arrived: ``ns`` (perf_counter_ns), ``loop_t`` (the loop's clock) and
    ``wait_ns``, how long it sat in the socket before the server read it (None: no stamp)."""

    __slots__ = ("loop_t", "ns", "wait_ns")

    def __init__(self, anc: list[tuple[int, int, bytes]]) -> None:
        read_ns, real_ns = perf_counter_ns(), time.time_ns()
        self.ns, self.wait_ns = read_ns, None
        for level, kind, value in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= 16:
                sec, nsec = struct.unpack("qq", value[:16])
                # the stamp is CLOCK_REALTIME: carried over by the two clocks read together
                self.wait_ns = max(0, real_ns - (sec * 1_000_000_000 + nsec))
                self.ns = read_ns - self.wait_ns
        self.loop_t = asyncio.get_running_loop().time() - (read_ns - self.ns) / 1e9


class Conn:
    """HTTP/1.1 keep-alive on a raw non-blocking socket (read with ``recvmsg`` for the kernel's
    receive stamp), one request at a time, Content-Length bodies only."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock, self.fd = sock, sock.fileno()
        self.buf = b""
        self.out = b""  # what the socket did not take yet
        self.closed = False
        self.loop = asyncio.get_running_loop()
        self.loop.add_reader(self.fd, self.readable)

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        if self.out:
            self.out += data
            return
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self.close()
            return
        if sent < len(data):
            self.out = data[sent:]
            self.loop.add_writer(self.fd, self._writable)

    def _writable(self) -> None:
        try:
            sent = self.sock.send(self.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        self.out = self.out[sent:]
        if not self.out:
            self.loop.remove_writer(self.fd)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.loop.remove_reader(self.fd)
            if self.out:
                self.loop.remove_writer(self.fd)
            self.sock.close()

    def readable(self) -> None:
        try:
            data, anc, _flags, _addr = self.sock.recvmsg(65536, ANCILLARY)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        if not data:
            self.close()
            return
        # the arrival is the kernel's stamp of the last segment read; the request is handled
        # after this read batch, so the others' handling counts in the server's own TTFT
        arrival = Arrival(anc)
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            request_line = head.split(" ", 2)
            if request_line[1].startswith("/v1/chat/completions") and request_line[0] == "POST":
                self.loop.call_soon(self.chat, body, arrival)
            else:
                self.handle(request_line, body)

    def chat(self, body: bytes, arrival: Arrival) -> None:
        if not self.closed:
            req = json.loads(body or b"{}")
            n = int(req.get("max_completion_tokens") or req.get("max_tokens") or 64)
            prompt = " ".join(
                m.get("content", "")
                for m in req.get("messages", [])
                if isinstance(m.get("content"), str)
            )
            Stream(self, n, len(prompt.split()), arrival)

    def handle(self, request_line: list[str], body: bytes) -> None:
        path = request_line[1]
        if path == "/v1/models":
            self.write(
                _json_response(
                    {
                        "object": "list",
                        "data": [{"id": "truth", "object": "model", "owned_by": "servelab"}],
                    }
                )
            )
        elif path == "/health":
            self.write(_json_response({}))
        elif path.startswith("/truth?last="):
            self.write(_json_response(TRUTH.summary(int(path.partition("=")[2]))))
        elif path == "/truth":
            self.write(_json_response(TRUTH.summary()))
        elif path == "/truth/reset":
            TRUTH.reset()
            self.write(_json_response({"ok": True}))
        else:
            self.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")


def _accept(listener: socket.socket) -> None:
    while True:
        try:
            sock, _addr = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        Conn(sock)


async def main() -> None:
    global GAP_S, PREFILL_S
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--gap-ms", type=float, default=20.0)
    parser.add_argument("--prefill-ms", type=float, default=50.0)
    args = parser.parse_args()
    GAP_S, PREFILL_S = args.gap_ms / 1e3, args.prefill_ms / 1e3
    # No cyclic GC while serving: its pauses (~10 ms, scanning every recorded write time) would
    # delay reading requests, a delay the server's own TTFT (from the parsed request) never
    # sees; garbage with cycles (a closed connection and its transport) waits for /truth/reset.
    gc.disable()
    loop = asyncio.get_running_loop()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # on the listener too: the kernel then stamps packets from the start (turning stamping on is
    # deferred), so a request that arrives before its connection is accepted is stamped as well
    listener.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(4096)
    listener.setblocking(False)
    loop.add_reader(listener.fileno(), _accept, listener)
    await asyncio.Event().wait()  # until terminated


if __name__ == "__main__":
    if uvloop is not None:
        uvloop.install()
    asyncio.run(main())
