"""The streaming load client: one aiohttp session, every chunk timestamped as it arrives.

The client stamps every read with ``perf_counter_ns()`` right after it returns and keeps the
``(stamp, bytes)`` pairs; the sans-I/O SSE decoder and chunk interpreter
(:func:`~servelab.core.records.decode_chunks`) turn them into events carrying their read's stamp:
at the end of the request, or, when the caller passes its own ``raw`` list, whenever the caller
chooses (the load generator decodes after the run, so no decoding competes with reading).

Every failure is written into the record, never raised: HTTP status (+ truncated body), malformed
or truncated stream, idle timeout, run deadline, connection error. The idle timeout (no byte for
``idle_timeout_s``) is one watchdog task per client scanning the in-flight streams' last-read
stamps, so a read costs no timer re-arm; it expires the stream's own ``asyncio.timeout_at`` scope
(the one that also enforces the run deadline). Only cancellation (Ctrl-C) propagates, after marking
the record.
"""

from __future__ import annotations

import asyncio
import json
from time import perf_counter_ns
from types import TracebackType
from typing import Any

import aiohttp

from servelab.core.records import (
    REASON_CONNECTION,
    REASON_DEADLINE,
    REASON_IDLE,
    REASON_INTERRUPTED,
    REASON_TRUNCATED,
    RequestRecord,
    decode_chunks,
    http_reason,
)

__all__ = ["Chunks", "StreamClient", "chat_body", "completion_body"]

Chunks = list[tuple[int, bytes]]

_ERROR_BODY_MAX = 2048


class _Watch:
    """One in-flight stream as the idle watchdog sees it."""

    __slots__ = ("idle", "last_ns", "scope")

    def __init__(self, now_ns: int) -> None:
        self.last_ns = now_ns
        self.idle = False
        self.scope: asyncio.Timeout | None = None


def chat_body(model: str, prompt: str, max_tokens: int, *, ignore_eos: bool = True) -> bytes:
    """A streaming ``/v1/chat/completions`` request body, serialised once up front."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
    }
    if ignore_eos:
        body["ignore_eos"] = True
    return json.dumps(body).encode()


def completion_body(model: str, prompt: str, max_tokens: int, *, ignore_eos: bool = True) -> bytes:
    """A streaming ``/v1/completions`` request body."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
    }
    if ignore_eos:
        body["ignore_eos"] = True
    return json.dumps(body).encode()


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
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.concurrency = concurrency
        self._timeout = aiohttp.ClientTimeout(total=None, connect=connect_timeout_s)
        self._idle_ns = round(idle_timeout_s * 1e9)
        self._tick_s = min(max(idle_timeout_s / 10, 0.01), 0.5)
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        self._session: aiohttp.ClientSession | None = None
        self._active: set[_Watch] = set()
        self._watchdog: asyncio.Task[None] | None = None

    async def __aenter__(self) -> StreamClient:
        connector = aiohttp.TCPConnector(
            limit=self.concurrency, limit_per_host=0, ttl_dns_cache=None
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=self._timeout,
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
        )
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
        if self._session is not None:
            await self._session.close()
            self._session = None

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
        :func:`~servelab.core.records.decode_chunks` (transport failures are already recorded).
        """
        chunks: Chunks = [] if raw is None else raw
        if self._session is None:
            raise RuntimeError("StreamClient used outside 'async with'")
        loop = asyncio.get_running_loop()
        when = None
        if deadline_ns is not None:
            when = loop.time() + (deadline_ns - perf_counter_ns()) / 1e9
        watch = _Watch(perf_counter_ns())
        self._active.add(watch)
        try:
            async with asyncio.timeout_at(when) as scope:
                watch.scope = scope
                await self._exchange(self._session, path, body, record, watch, chunks)
        except TimeoutError:
            if watch.idle:
                record.fail(REASON_IDLE, "no bytes from the server within the idle timeout")
            else:
                record.fail(REASON_DEADLINE, "the run deadline passed mid-request")
        except asyncio.CancelledError:
            record.fail(REASON_INTERRUPTED, "cancelled")
            raise
        finally:
            self._active.discard(watch)
            _close_end(record)
        if raw is None:
            decode_chunks(record, chunks, record.end_ns or perf_counter_ns())
        return record

    async def _watch_idle(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self._tick_s)
            limit = perf_counter_ns() - self._idle_ns
            for watch in self._active:
                if watch.last_ns < limit and not watch.idle and watch.scope is not None:
                    watch.idle = True
                    watch.scope.reschedule(loop.time())

    async def _exchange(
        self,
        session: aiohttp.ClientSession,
        path: str,
        body: bytes,
        record: RequestRecord,
        watch: _Watch,
        chunks: Chunks,
    ) -> None:
        record.sent_ns = watch.last_ns = perf_counter_ns()
        try:
            async with session.post(self.base_url + path, data=body, headers=self._headers) as resp:
                record.first_byte_ns = watch.last_ns = perf_counter_ns()
                record.status = resp.status
                if resp.status >= 300:
                    text = await resp.content.read(_ERROR_BODY_MAX)
                    record.fail(http_reason(resp.status), text.decode("utf-8", "replace"))
                    record.end_ns = perf_counter_ns()
                    return
                await _pump(resp, chunks, watch)
                record.end_ns = perf_counter_ns()
        except aiohttp.ClientPayloadError as exc:
            record.fail(REASON_TRUNCATED, str(exc))
        except aiohttp.ConnectionTimeoutError as exc:
            record.fail(REASON_CONNECTION, f"connect timeout: {exc}")
        except (aiohttp.ClientConnectionError, aiohttp.ClientResponseError, ConnectionError) as exc:
            record.fail(REASON_CONNECTION, f"{type(exc).__name__}: {exc}")


async def _pump(resp: aiohttp.ClientResponse, chunks: Chunks, watch: _Watch) -> None:
    read = resp.content.readany
    append = chunks.append
    while True:
        data = await read()
        now = watch.last_ns = perf_counter_ns()
        if not data:
            return
        append((now, data))


def _close_end(record: RequestRecord) -> None:
    if record.end_ns is None:
        record.end_ns = perf_counter_ns()
