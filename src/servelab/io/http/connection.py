"""One HTTP/1.1 connection of the stream client as a raw asyncio protocol (:class:`Connection`):
one exchange at a time, every read stamped with ``perf_counter_ns()`` in ``data_received`` (no
task wakes per read) and unframed by the sans-I/O :class:`~servelab.io.http.h1.ResponseParser`;
an error answer's body kept up to 2 KiB; every failure written into the request's record, never
raised. :class:`IdleWatch` is one in-flight exchange as the client's idle watchdog sees it. The
pool, the watchdog and the closed-loop chains are :mod:`servelab.io.http.stream`."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from time import perf_counter_ns
from typing import cast

from servelab.core.load.liveness import DataLines
from servelab.core.load.records import REASON_CONNECTION, REASON_TRUNCATED, http_reason
from servelab.errors import ProtocolError
from servelab.io.http.h1 import ResponseParser
from servelab.io.http.transfer import Transfer

__all__ = ["Connection", "IdleWatch"]

_ERROR_BODY_MAX = 2048


class IdleWatch:
    """One in-flight stream as the idle watchdog sees it."""

    __slots__ = ("idle", "last_ns", "scope")

    def __init__(self, now_ns: int) -> None:
        self.last_ns = now_ns
        self.idle = False
        self.scope: asyncio.Timeout | None = None


def _data_lines(parser: ResponseParser) -> DataLines | None:
    """An event stream's line state (its ``data:`` lines alone keep it alive); None: any other
    answer, whose every byte counts."""
    ok = parser.status is not None and parser.status < 300
    stream = "text/event-stream" in parser.headers.get("content-type", "").lower()
    return DataLines() if ok and stream else None


class Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: one exchange at a time, its reads stamped as they arrive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = ResponseParser()
        self.lost = False
        self.uses = 0  # requests it carried, the one in flight included
        self.idle_since = time.monotonic()  # when its last answer ended
        self._got: Transfer | None = None
        self._watch: IdleWatch | None = None
        self._done: asyncio.Future[None] | None = None
        self._then: Callable[[Connection, int], None] | None = None
        self._lines: DataLines | None = None  # an event stream's lines: what the idle watch counts

    # ------------------------------------------------------------------- asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        sock = self.transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        now = perf_counter_ns()
        got, watch = self._got, self._watch
        if got is None or watch is None:
            self._close()  # bytes nobody asked for: this connection cannot be trusted
            return
        parser = self.parser
        had_head = parser.head_done
        try:
            body = parser.feed(data)
        except ProtocolError as exc:
            self._fail(exc)
            return
        if not parser.head_done:
            watch.last_ns = now  # the head's bytes count
            return
        record = got.record
        if not had_head:
            watch.last_ns = now
            record.first_byte_ns, record.status = now, parser.status
            got.headers = dict(parser.headers)
            self._lines = _data_lines(parser)
        if record.status is not None and record.status >= 300:
            watch.last_ns = now
            self._error_body(got, body)
        elif body:
            got.chunks.append((now, body))
            if self._lines is None or self._lines.feed(body):
                watch.last_ns = now  # an event stream's comments and blank lines do not count
        if parser.done:
            record.end_ns = end = perf_counter_ns()
            then = self._then
            self._finish()
            if then is not None and record.error is None and self.reusable:
                then(self, end)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self._got is None:
            return
        try:
            self.parser.eof()
        except ProtocolError as error:
            self._fail(error, exc)
            return
        self._got.record.end_ns = perf_counter_ns()
        self._finish()

    # ---------------------------------------------------------------------------- exchange
    def start(
        self,
        request: bytes,
        got: Transfer,
        watch: IdleWatch,
        then: Callable[[Connection, int], None] | None = None,
    ) -> asyncio.Future[None]:
        """Write ``request``; ``then(conn, end_ns)`` runs when its answer ends well."""
        assert self.transport is not None
        self.parser.reset()
        self._got, self._watch, self._then = got, watch, then
        self._done = done = asyncio.get_running_loop().create_future()
        if self.lost or self.transport.is_closing():
            self._fail(ProtocolError("head", "connection closed before the request was sent"))
        else:
            # stamped at the write, not after it: on loopback the server's receive runs inside
            # the write, so a later stamp could come after the server saw the request
            got.record.sent_ns = watch.last_ns = perf_counter_ns()
            self.transport.write(request)
        return done

    @property
    def reusable(self) -> bool:
        return not self.lost and self._got is None and self.parser.keep_alive

    def abandon(self) -> None:
        """The request was cut (timeout, cancel): the connection is in an unknown state."""
        self._got = self._watch = self._then = None
        self._close()

    def _error_body(self, got: Transfer, body: bytes) -> None:
        got.error_body += body[: _ERROR_BODY_MAX - len(got.error_body)]
        record = got.record
        if len(got.error_body) >= _ERROR_BODY_MAX or self.parser.done:
            record.fail(http_reason(record.status or 0), got.error_body.decode("utf-8", "replace"))
        if len(got.error_body) >= _ERROR_BODY_MAX and not self.parser.done:
            self.parser.keep_alive = False  # the rest is not read: not reusable
            record.end_ns = perf_counter_ns()
            self._finish()

    def _fail(self, error: ProtocolError, cause: Exception | None = None) -> None:
        assert self._got is not None
        record = self._got.record
        if error.phase == "body":
            record.fail(REASON_TRUNCATED, str(error))
        else:
            detail = f"{error}" + (f" ({type(cause).__name__}: {cause})" if cause else "")
            record.fail(REASON_CONNECTION, detail)
        self.parser.keep_alive = False
        record.end_ns = perf_counter_ns()
        self._finish()
        self._close()

    def _finish(self) -> None:
        done = self._done
        self._got = self._watch = self._done = self._then = None
        if done is not None and not done.done():
            done.set_result(None)

    def _close(self) -> None:
        self.lost = True
        if self.transport is not None:
            self.transport.close()
