"""The streaming load client: a keep-alive pool of raw asyncio connections
(:class:`~servelab.io.http.connection.Connection`, a stamp per read), the idle watchdog, resends
and the closed-loop chains.

Every read is stamped with ``perf_counter_ns()`` in the protocol's ``data_received`` (no task
wakes per read: the awaiting request sleeps until its response ends), its transfer framing is
removed by the sans-I/O :class:`~servelab.io.http.h1.ResponseParser`, and the ``(stamp, bytes)``
pair is kept; the sans-I/O SSE decoder and chunk interpreter
(:func:`~servelab.core.load.records.decode_chunks`) turn the pairs into events carrying their read's
stamp: at the end of the request, or, when the caller passes its own ``raw`` list (or asks for the
:class:`Transfer`), whenever the caller chooses (the load generator decodes after the run, so no
decoding competes with reading). Why this transport, and what it was measured against:
``docs/bench.md`` ("The client").

- ``force_close`` gives every request a fresh connection; ``trace_connections`` keeps
  :class:`Connections` (soak's keep-alive sessions, ``concurrency=1``).
- A kept-alive connection the server closed while it sat idle is replaced by a new one (found
  closed in the pool, or closed before any byte of the answer: the request is sent once more);
  each replacement is a :class:`Resend` on the request's :class:`Transfer`, with how long the
  connection had been idle: a failure the client masked. ``resend=False`` is a plain client
  instead: it writes on the kept-alive connection whatever state it is in and never sends again,
  so the server's close is the request's failure.
- The answer's head is kept (:attr:`Transfer.headers`): which hop answered (``Server``, the
  router's ``x-request-id``) is evidence.
- ``proxy``: through that forward proxy (:mod:`servelab.io.http.forward`).
- :meth:`StreamClient.connect` opens connections ahead of the load: connection set-up is its own
  phase (:attr:`StreamClient.setups_ns` keeps every set-up's duration, those opened mid-run too).
- At most ``concurrency`` requests are in flight; the rest wait for a connection (inside the
  request's deadline).
- A :class:`Chain` (a closed-loop user's next request) is written from the read callback the
  instant the previous request ends on its kept-alive connection, before any task wakes; the
  request's coroutine then adopts the exchange already on the wire (no dispatch queue of task
  wake-ups when many users finish together). ``sent_ns`` is stamped at the write, after the
  rest of the send path.

Every stream failure is written into the record, never raised: HTTP status (+ truncated body),
malformed or truncated stream, idle timeout, run deadline, connection error. The idle timeout (no
byte of the head, then no byte of an event stream's ``data:`` lines, for ``idle_timeout_s``: an
engine sending only ``: keepalive`` comments is idle; :mod:`servelab.core.load.liveness`) is one
watchdog task per client scanning the in-flight streams' last-read stamps, so a read costs no
timer re-arm; it expires the stream's own ``asyncio.timeout_at`` scope (the one that also enforces
the run deadline). Only cancellation (Ctrl-C) propagates, after marking the record.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from time import perf_counter_ns
from types import TracebackType

from servelab.core.load.records import (
    REASON_CONNECTION,
    REASON_DEADLINE,
    REASON_IDLE,
    REASON_INTERRUPTED,
    RequestRecord,
    decode_chunks,
)
from servelab.io.http.connection import Connection, IdleWatch
from servelab.io.http.forward import via
from servelab.io.http.h1 import request_head
from servelab.io.http.neterrors import translate
from servelab.io.http.transfer import Chunks, Connections, Resend, Transfer

__all__ = [
    "Chain",
    "Outgoing",
    "StreamClient",
]


@dataclass(slots=True)
class Outgoing:
    """One request ready to go: its path, its whole bytes (head and body, built ahead with
    :meth:`StreamClient.request_bytes`), its record and the list its stamped reads go to."""

    path: str
    request: bytes
    record: RequestRecord
    chunks: Chunks


@dataclass(slots=True)
class _Started:
    """An exchange a :class:`Chain` put on the wire, waiting for its coroutine to adopt it."""

    out: Outgoing
    conn: Connection
    got: Transfer
    watch: IdleWatch
    done: asyncio.Future[None]


class Chain:
    """A closed-loop user: ``following(end_ns)`` gives its next request (or None) the instant the
    previous one ends well on a kept-alive connection; it is written there and then, from the read
    callback, and :meth:`StreamClient.send` with the same chain adopts it."""

    __slots__ = ("following", "started")

    def __init__(self, following: Callable[[int], Outgoing | None]) -> None:
        self.following = following
        self.started: _Started | None = None

    def take(self) -> Outgoing | None:
        """The request already written for this user, if one is (its send adopts it)."""
        return None if self.started is None else self.started.out


def _idle_detail(record: RequestRecord) -> str:
    """Why the idle timeout fired: no byte at all, or (an event stream's comments, blank lines
    and other fields do not count) no data."""
    if record.first_byte_ns is None:
        return "no bytes from the server within the idle timeout"
    return "no data line from the server within the idle timeout (comments do not count)"


class StreamClient:
    """``async with StreamClient(url, concurrency=64) as client: await client.stream(...)``."""

    def __init__(
        self,
        base_url: str,
        *,
        concurrency: int,
        idle_timeout_s: float = 60.0,
        connect_timeout_s: float = 10.0,
        headers: dict[str, str] | None = None,
        force_close: bool = False,
        trace_connections: bool = False,
        resend: bool = True,
        proxy: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.concurrency = concurrency
        #: Kept when ``trace_connections``.
        self.connections = Connections() if trace_connections else None
        #: How long each connection this client opened took to set up (ns), in opening order.
        self.setups_ns: list[int] = []
        self._via = via(self.base_url, proxy)  # straight, or through a forward proxy
        self._connect_s = connect_timeout_s
        self._force_close = force_close
        self._resend = resend
        self._idle_ns = round(idle_timeout_s * 1e9)
        self._tick_s = min(max(idle_timeout_s / 10, 0.01), 0.5)
        self._headers = {"Content-Type": "application/json", **self._via.headers, **(headers or {})}
        if force_close:
            self._headers["Connection"] = "close"
        self._pool: list[Connection] = []
        self._slots: asyncio.Semaphore | None = None
        self._active: set[IdleWatch] = set()
        self._watchdog: asyncio.Task[None] | None = None

    async def __aenter__(self) -> StreamClient:
        self._slots = asyncio.Semaphore(self.concurrency)
        self._watchdog = asyncio.create_task(self._watch_idle())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            await asyncio.gather(self._watchdog, return_exceptions=True)
        for conn in self._pool:
            conn.abandon()
        if self._pool:
            await asyncio.sleep(0)  # let the closed transports say goodbye on this loop
        self._pool = []
        self._slots = None

    async def connect(self, n: int) -> list[int]:
        """Open connections until ``n`` (at most ``concurrency``) are idle in the pool; the
        set-up time of each one opened (ns). Failures are left for the requests to meet."""
        self._pool = [c for c in self._pool if c.reusable]
        missing = min(n, self.concurrency) - len(self._pool)
        if missing <= 0 or self._force_close:
            return []
        opened = await asyncio.gather(
            *(self._open() for _ in range(missing)), return_exceptions=True
        )
        conns = [c for c in opened if isinstance(c, Connection)]
        self._pool.extend(conns)
        return self.setups_ns[len(self.setups_ns) - len(conns) :] if conns else []

    async def stream(
        self,
        path: str,
        body: bytes,
        record: RequestRecord,
        *,
        deadline_ns: int | None = None,
        raw: Chunks | None = None,
    ) -> RequestRecord:
        """POST ``body`` to ``path`` and stream the answer into ``record`` (also returned).

        With ``raw``, the body's stamped reads are left there for the caller to decode later with
        :func:`~servelab.core.load.records.decode_chunks` (transport failures are already recorded).
        """
        got = await self.transfer(path, body, record, deadline_ns=deadline_ns, chunks=raw)
        if raw is None:
            decode_chunks(record, got.chunks, record.end_ns or perf_counter_ns())
        return record

    async def transfer(
        self,
        path: str,
        body: bytes,
        record: RequestRecord,
        *,
        deadline_ns: int | None = None,
        chunks: Chunks | None = None,
    ) -> Transfer:
        """POST ``body`` to ``path``; the answer's reads, undecoded (into ``chunks`` if given).

        Status, stamps and transport failures are in ``record``; nothing is decoded.
        """
        request = self.request_bytes(path, body, record.request_id, record.traceparent)
        out = Outgoing(path, request, record, [] if chunks is None else chunks)
        return await self.send(out, deadline_ns=deadline_ns)

    async def send(
        self, out: Outgoing, *, deadline_ns: int | None = None, chain: Chain | None = None
    ) -> Transfer:
        """Send ``out`` (or adopt it, when ``chain`` already wrote it) and receive the answer,
        undecoded; with ``chain``, its next request goes out the instant this one ends."""
        if self._slots is None:
            raise RuntimeError("StreamClient used outside 'async with'")
        started = None
        if chain is not None and chain.started is not None and chain.started.out is out:
            started, chain.started = chain.started, None
        got = Transfer(out.record, out.chunks) if started is None else started.got
        watch = IdleWatch(perf_counter_ns()) if started is None else started.watch
        record = out.record
        when = None
        if deadline_ns is not None:
            when = asyncio.get_running_loop().time() + (deadline_ns - perf_counter_ns()) / 1e9
        self._active.add(watch)
        try:
            async with asyncio.timeout_at(when) as scope:
                watch.scope = scope
                async with self._slots:
                    await self._exchange(out.request, got, watch, chain, started)
        except TimeoutError:
            if watch.idle:
                record.fail(REASON_IDLE, _idle_detail(record))
            else:
                record.fail(REASON_DEADLINE, "the run deadline passed mid-request")
        except asyncio.CancelledError:
            record.fail(REASON_INTERRUPTED, "cancelled")
            raise
        finally:
            self._active.discard(watch)
            if record.end_ns is None:
                record.end_ns = perf_counter_ns()
        return got

    def drop(self, chain: Chain) -> None:
        """The user of ``chain`` stopped (cancelled, or failed): the request already written for
        it is cut (recorded as interrupted unless it had ended) and its connection closed."""
        started, chain.started = chain.started, None
        if started is None:
            return
        record = started.out.record
        if not started.done.done():
            record.fail(REASON_INTERRUPTED, "cancelled")
        if record.end_ns is None:
            record.end_ns = perf_counter_ns()
        self._active.discard(started.watch)
        started.conn.abandon()

    async def _watch_idle(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self._tick_s)
            limit = perf_counter_ns() - self._idle_ns
            for watch in self._active:
                if watch.last_ns < limit and not watch.idle and watch.scope is not None:
                    watch.idle = True
                    watch.scope.reschedule(loop.time())

    def request_bytes(
        self, path: str, body: bytes, request_id: str = "", traceparent: str = ""
    ) -> bytes:
        """The whole request (head and body) for POSTing ``body`` to ``path``, with the record's
        identity headers (``x-request-id`` and W3C ``traceparent``) when given."""
        headers = self._headers
        if request_id:
            headers = {**headers, "x-request-id": request_id}
            if traceparent:
                headers["traceparent"] = traceparent
        head = request_head(
            "POST", self._via.prefix + path, self._via.authority, headers, len(body)
        )
        return head + body

    async def _exchange(
        self,
        request: bytes,
        got: Transfer,
        watch: IdleWatch,
        chain: Chain | None,
        started: _Started | None,
    ) -> None:
        record = got.record
        if started is None:  # stamped again at the write
            record.sent_ns = watch.last_ns = perf_counter_ns()
        then = None if chain is None or self._force_close else partial(self._handoff, chain)
        for _attempt in range(2):
            if started is not None:
                conn, done, started = started.conn, started.done, None
            else:
                fresh = await self._conn(got)
                if fresh is None:
                    return
                conn, done = fresh, fresh.start(request, got, watch, then)
            reused, idle_s = conn.uses > 1, time.monotonic() - conn.idle_since
            try:
                await done
            except BaseException:
                conn.abandon()
                raise
            self._release(conn, chain)
            if not (self._resend and reused and _closed_before_answer(record)):
                return
            # a kept-alive connection the server had closed: once more on a new one
            got.resends.append(Resend(round(idle_s, 3), before_send=False))
            record.error, record.error_detail, record.end_ns = None, "", None

    def _release(self, conn: Connection, chain: Chain | None) -> None:
        """Back to the pool, unless it carries the chain's next request or cannot be reused."""
        if chain is not None and chain.started is not None and chain.started.conn is conn:
            return
        if conn.reusable and not self._force_close:
            conn.idle_since = time.monotonic()
            self._pool.append(conn)
        else:
            conn.abandon()

    def launch(self, chain: Chain, out: Outgoing) -> None:
        """Write ``out`` now, from the caller, without a task wake-up, on an idle kept-alive
        connection if there is one; :meth:`send` with ``chain`` adopts it (and sends it itself
        when no connection was idle)."""
        if chain.started is not None or self._force_close:
            return
        while self._pool:
            conn = self._pool.pop()
            if conn.reusable and conn.transport is not None and not conn.transport.is_closing():
                self._start_on(chain, conn, out)
                return

    def _handoff(self, chain: Chain, conn: Connection, end_ns: int) -> None:
        """From the read callback: the chain's previous request ended well on ``conn``; write
        its next one there now (unless the one before is not adopted yet)."""
        if chain.started is not None:
            return
        out = chain.following(end_ns)
        if out is not None:
            self._start_on(chain, conn, out)

    def _start_on(self, chain: Chain, conn: Connection, out: Outgoing) -> None:
        got, watch = Transfer(out.record, out.chunks), IdleWatch(perf_counter_ns())
        out.record.sent_ns = watch.last_ns  # stamped again at the write
        self._active.add(watch)
        self._traced(conn)
        done = conn.start(out.request, got, watch, partial(self._handoff, chain))
        chain.started = _Started(out, conn, got, watch, done)

    async def _conn(self, got: Transfer) -> Connection | None:
        """A kept-alive connection if one is idle, else a new one (None: failure recorded). One
        the server closed is replaced (a :class:`Resend` noted), unless this is a plain client
        (``resend=False``): it is used as it is, and the request meets the close."""
        record = got.record
        while self._pool:
            conn = self._pool.pop()
            if not self._resend or (
                conn.reusable and conn.transport is not None and not conn.transport.is_closing()
            ):
                self._traced(conn)
                return conn
            idle_s = round(time.monotonic() - conn.idle_since, 3)  # the server closed it idle
            got.resends.append(Resend(idle_s, before_send=True))
        try:
            conn = await self._open()
        except TimeoutError as exc:
            record.fail(REASON_CONNECTION, f"connect timeout: {exc}")
            return None
        except OSError as exc:
            record.fail(*translate(exc))
            return None
        self._traced(conn)
        return conn

    def _traced(self, conn: Connection) -> None:
        conn.uses += 1
        if self.connections is not None:
            if conn.uses == 1:
                self.connections.created()
            else:
                self.connections.reused(time.monotonic() - conn.idle_since)

    async def _open(self) -> Connection:
        loop = asyncio.get_running_loop()
        start = perf_counter_ns()
        async with asyncio.timeout(self._connect_s):
            _transport, conn = await self._via.open(loop, Connection)
        self.setups_ns.append(perf_counter_ns() - start)
        return conn


def _closed_before_answer(record: RequestRecord) -> bool:
    """The connection closed before any byte of an answer (nothing was lost by retrying)."""
    return record.error == REASON_CONNECTION and record.first_byte_ns is None
