"""The HTTP client for everything servelab sends: probes, JSON GETs, timestamped streams, keep-alive
sessions.

One function builds the aiohttp session (:func:`_session`) and one translates aiohttp and OS errors
(:func:`translate`); nothing outside ``io/`` (and the simulator) touches aiohttp.

- :class:`HttpClient` (probes, :meth:`~HttpClient.get_json`, :meth:`~HttpClient.model_id`,
  :meth:`~HttpClient.model_list`: what answered ``GET /v1/models``): one
  keep-alive session a command holds and closes. Probes never raise for HTTP or transport failures
  (refused, reset, timeout, DNS): the :class:`ProbeResult` carries the error. The module-level
  :func:`probe`, :func:`get_json` and :func:`model_id` are for one-off callers (a session each).
- :class:`StreamClient`: the streaming load client. It stamps every read with ``perf_counter_ns()``
  right after it returns and keeps the ``(stamp, bytes)`` pairs; the sans-I/O SSE decoder and chunk
  interpreter (:func:`~servelab.core.records.decode_chunks`) turn them into events carrying their
  read's stamp: at the end of the request, or, when the caller passes its own ``raw`` list (or asks
  for the :class:`Transfer`), whenever the caller chooses (the load generator decodes after the run,
  so no decoding competes with reading). ``force_close`` gives every request a fresh connection;
  ``trace_connections`` keeps :class:`Connections` (soak's keep-alive sessions, ``concurrency=1``).

Every stream failure is written into the record, never raised: HTTP status (+ truncated body),
malformed or truncated stream, idle timeout, run deadline, connection error. The idle timeout (no
byte for ``idle_timeout_s``, response head included) is one watchdog task per client scanning the
in-flight streams' last-read stamps, so a read costs no timer re-arm; it expires the stream's own
``asyncio.timeout_at`` scope (the one that also enforces the run deadline). Only cancellation
(Ctrl-C) propagates, after marking the record.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
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

__all__ = [
    "BODY_LIMIT",
    "Chunks",
    "Connections",
    "HttpClient",
    "ModelList",
    "ProbeResult",
    "StreamClient",
    "Transfer",
    "chat_body",
    "completion_body",
    "get_json",
    "model_id",
    "model_list",
    "probe",
    "translate",
    "using_client",
]

#: Bodies are truncated to this many characters by default (enough for /health, /readiness,
#: error JSON); ``probe(..., body_limit=None)`` keeps the whole body (a JSON document, /metrics).
BODY_LIMIT = 500

Chunks = list[tuple[int, bytes]]

_ERROR_BODY_MAX = 2048
#: What the client catches and translates (OSError covers refused, reset, DNS and timeouts).
_TRANSPORT_ERRORS = (aiohttp.ClientError, OSError)


# ------------------------------------------------------------------------ the two single places
def translate(exc: BaseException, *, timeout_s: float | None = None) -> tuple[str, str]:
    """An aiohttp or OS error as ``(record failure reason, detail)``: the one translation.

    ``timeout_s`` is a probe's whole-exchange timeout (its expiry reads "timed out after Ns");
    without it a timeout is a stream's connect timeout.
    """
    if isinstance(exc, aiohttp.ClientPayloadError):
        return REASON_TRUNCATED, str(exc)
    if isinstance(exc, TimeoutError):
        if timeout_s is not None:
            return REASON_CONNECTION, f"timed out after {timeout_s}s"
        return REASON_CONNECTION, f"connect timeout: {exc}"
    text = str(exc) or type(exc).__name__
    return REASON_CONNECTION, f"{type(exc).__name__}: {text}"[:300]


def _session(
    limit: int,
    *,
    raw: bool = False,
    force_close: bool = False,
    connect_s: float | None = None,
    trace: aiohttp.TraceConfig | None = None,
) -> aiohttp.ClientSession:
    """The one place servelab builds an aiohttp session for its outgoing traffic.

    ``raw``: the stream client's bytes as sent (no decompression) and DNS cached for the client's
    life; ``force_close``: a fresh connection for every request.
    """
    connector = aiohttp.TCPConnector(
        limit=limit,
        limit_per_host=0,
        ttl_dns_cache=None if raw else 10,
        force_close=force_close,
    )
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None, connect=connect_s),
        auto_decompress=not raw,
        cookie_jar=aiohttp.DummyCookieJar(),
        trace_configs=None if trace is None else [trace],
    )


# ---------------------------------------------------------------------------------- probes
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def _html_summary(body: str) -> str | None:
    """``(HTML page "Title")`` for an HTML body (never quoted raw), else None."""
    head = body.lstrip()[:200].lower()
    if not head.startswith(("<!doctype html", "<html")):
        return None
    title = _TITLE.search(body)
    name = " ".join(title.group(1).split())[:80] if title else ""
    return f'(HTML page "{name}")' if name else "(HTML page)"


@dataclass(frozen=True)
class ProbeResult:
    """The answer to one probe: ``status`` None means no HTTP answer (see ``error``)."""

    url: str
    status: int | None
    body: str
    elapsed_s: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    def describe(self) -> str:
        """A one-line summary: ``HTTP 503 {"status":"starting"}`` or ``no answer: <error>``."""
        if self.status is None:
            return f"no answer: {self.error}"
        snippet = _html_summary(self.body) or " ".join(self.body.split())[:160]
        return f"HTTP {self.status} {snippet}".rstrip()

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class HttpClient:
    """``async with HttpClient() as http: await http.probe(url, timeout=5)``: one keep-alive
    session for a command's probes and JSON GETs (``aclose()`` when not used with ``async with``).
    """

    def __init__(self, *, limit: int = 100) -> None:
        self._limit = limit
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    def _open(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = _session(self._limit)
        return self._http

    async def probe(
        self,
        url: str,
        *,
        timeout: float,
        method: str = "GET",
        json_body: Any = None,
        headers: dict[str, str] | None = None,
        body_limit: int | None = BODY_LIMIT,
    ) -> ProbeResult:
        """Send one request to ``url`` and report status, body and elapsed time.

        The body is cut to ``body_limit`` characters; None keeps all of it. ``timeout`` bounds the
        whole exchange, body included.
        """
        start = time.perf_counter()
        limit = aiohttp.ClientTimeout(total=timeout)
        try:
            async with self._open().request(
                method, url, json=json_body, headers=headers, timeout=limit
            ) as response:
                body = await _read_body(response, body_limit)
                status = response.status
        except (*_TRANSPORT_ERRORS, ValueError) as exc:
            error = translate(exc, timeout_s=timeout)[1]
            return ProbeResult(url, None, "", time.perf_counter() - start, error)
        return ProbeResult(url, status, body, time.perf_counter() - start)

    async def get_json(self, url: str, *, timeout: float = 5.0) -> Any:
        """GET a JSON document in full; None on any failure (no answer, not 200, not JSON)."""
        result = await self.probe(url, timeout=timeout, body_limit=None)
        if result.status != 200:
            return None
        try:
            return json.loads(result.body)
        except ValueError:
            return None

    async def model_id(self, base_url: str, timeout: float = 10.0) -> str | None:
        """The first model ``GET /v1/models`` lists; None when it cannot be read."""
        doc = await self.get_json(base_url.rstrip("/") + "/v1/models", timeout=timeout)
        try:
            return str(doc["data"][0]["id"])
        except (KeyError, IndexError, TypeError):
            return None

    async def model_list(self, base_url: str, timeout: float = 10.0) -> ModelList:
        """What answered ``GET <base_url>/v1/models``: an OpenAI model list, or what else."""
        url = base_url.rstrip("/") + "/v1/models"
        limit = aiohttp.ClientTimeout(total=timeout)
        try:
            async with self._open().get(url, timeout=limit) as response:
                body = await _read_body(response, 64 * 1024)
                status, content_type = response.status, response.content_type
        except (*_TRANSPORT_ERRORS, ValueError) as exc:
            return ModelList(url, None, None, None, translate(exc, timeout_s=timeout)[1])
        try:
            doc = json.loads(body)
            models = tuple(str(item["id"]) for item in doc["data"])
        except (ValueError, KeyError, TypeError):
            models = None
        return ModelList(url, status, content_type, models, None, _html_summary(body))


@dataclass(frozen=True)
class ModelList:
    """The answer to ``GET /v1/models``: ``models`` is None unless it is an OpenAI model list."""

    url: str
    status: int | None
    content_type: str | None
    models: tuple[str, ...] | None
    error: str | None = None
    html: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.models is not None

    def describe(self) -> str:
        """One line: ``URL answered HTTP 404 text/html (HTML page "Not Found"), not an OpenAI
        model list`` or ``URL: no answer: <error>``."""
        if self.status is None:
            return f"{self.url}: no answer: {self.error}"
        what = " ".join(x for x in (self.content_type, self.html) if x)
        verdict = "an OpenAI model list" if self.ok else "not an OpenAI model list"
        return f"{self.url} answered HTTP {self.status} {what}, {verdict}".replace("  ", " ")


@contextlib.asynccontextmanager
async def using_client(http: HttpClient | None) -> AsyncIterator[HttpClient]:
    """``http`` itself (its owner closes it), else a client of its own, closed on exit."""
    if http is not None:
        yield http
        return
    async with HttpClient() as own:
        yield own


async def _read_body(response: aiohttp.ClientResponse, limit: int | None) -> str:
    if limit is None:
        return (await response.read()).decode("utf-8", "replace")
    raw = await response.content.read(limit * 4)
    return raw.decode("utf-8", "replace")[:limit]


async def probe(
    url: str,
    *,
    timeout: float,
    method: str = "GET",
    json_body: Any = None,
    headers: dict[str, str] | None = None,
    body_limit: int | None = BODY_LIMIT,
) -> ProbeResult:
    """One probe on a client of its own (see :meth:`HttpClient.probe`)."""
    async with HttpClient(limit=1) as http:
        return await http.probe(
            url,
            timeout=timeout,
            method=method,
            json_body=json_body,
            headers=headers,
            body_limit=body_limit,
        )


async def get_json(url: str, *, timeout: float = 5.0) -> Any:
    """One JSON GET on a client of its own (see :meth:`HttpClient.get_json`)."""
    async with HttpClient(limit=1) as http:
        return await http.get_json(url, timeout=timeout)


async def model_id(base_url: str, timeout: float = 10.0) -> str | None:
    """One model lookup on a client of its own (see :meth:`HttpClient.model_id`)."""
    async with HttpClient(limit=1) as http:
        return await http.model_id(base_url, timeout)


async def model_list(base_url: str, timeout: float = 10.0) -> ModelList:
    """One ``GET /v1/models`` on a client of its own (see :meth:`HttpClient.model_list`)."""
    async with HttpClient(limit=1) as http:
        return await http.model_list(base_url, timeout)


# --------------------------------------------------------------------------------- streams
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


@dataclass
class Connections:
    """The connections a client opened (aiohttp's connection signals): how many, when the current
    one opened (``time.monotonic()``), and how many requests it carried, the one in flight included.
    """

    opened: int = 0
    opened_at: float = field(default_factory=time.monotonic)
    requests: int = 0

    @property
    def carried(self) -> int:
        """Requests the current connection carried before the one in flight."""
        return max(self.requests - 1, 0)

    def age_s(self) -> float:
        return time.monotonic() - self.opened_at

    async def _created(self, *_: Any) -> None:
        self.opened, self.opened_at, self.requests = self.opened + 1, time.monotonic(), 1

    async def _reused(self, *_: Any) -> None:
        self.requests += 1

    def trace(self) -> aiohttp.TraceConfig:
        config = aiohttp.TraceConfig()
        config.on_connection_create_end.append(self._created)
        config.on_connection_reuseconn.append(self._reused)
        return config


@dataclass
class Transfer:
    """What one streamed request received, left undecoded: the stamped body reads, or the
    (truncated) body of an HTTP error answer. The record holds status, stamps and failures."""

    record: RequestRecord
    chunks: Chunks = field(default_factory=list)
    error_body: bytes = b""

    @property
    def received_bytes(self) -> int:
        return len(self.error_body) + sum(len(data) for _, data in self.chunks)

    @property
    def phase(self) -> str:
        """``"head"`` while no response head arrived, then ``"body"``."""
        return "head" if self.record.first_byte_ns is None else "body"


class _Watch:
    """One in-flight stream as the idle watchdog sees it."""

    __slots__ = ("idle", "last_ns", "scope")

    def __init__(self, now_ns: int) -> None:
        self.last_ns = now_ns
        self.idle = False
        self.scope: asyncio.Timeout | None = None


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
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.concurrency = concurrency
        #: Kept when ``trace_connections`` (which costs a few signals per request).
        self.connections = Connections() if trace_connections else None
        self._connect_s = connect_timeout_s
        self._force_close = force_close
        self._idle_ns = round(idle_timeout_s * 1e9)
        self._tick_s = min(max(idle_timeout_s / 10, 0.01), 0.5)
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        self._session: aiohttp.ClientSession | None = None
        self._active: set[_Watch] = set()
        self._watchdog: asyncio.Task[None] | None = None

    async def __aenter__(self) -> StreamClient:
        self._session = _session(
            self.concurrency,
            raw=True,
            force_close=self._force_close,
            connect_s=self._connect_s,
            trace=None if self.connections is None else self.connections.trace(),
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
        if self._session is None:
            raise RuntimeError("StreamClient used outside 'async with'")
        got = Transfer(record, [] if chunks is None else chunks)
        loop = asyncio.get_running_loop()
        when = None
        if deadline_ns is not None:
            when = loop.time() + (deadline_ns - perf_counter_ns()) / 1e9
        watch = _Watch(perf_counter_ns())
        self._active.add(watch)
        try:
            async with asyncio.timeout_at(when) as scope:
                watch.scope = scope
                await self._exchange(self._session, path, body, got, watch)
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
        return got

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
        got: Transfer,
        watch: _Watch,
    ) -> None:
        record = got.record
        record.sent_ns = watch.last_ns = perf_counter_ns()
        try:
            async with session.post(self.base_url + path, data=body, headers=self._headers) as resp:
                record.first_byte_ns = watch.last_ns = perf_counter_ns()
                record.status = resp.status
                if resp.status >= 300:
                    got.error_body = await resp.content.read(_ERROR_BODY_MAX)
                    text = got.error_body.decode("utf-8", "replace")
                    record.fail(http_reason(resp.status), text)
                    record.end_ns = perf_counter_ns()
                    return
                await _pump(resp, got.chunks, watch)
                record.end_ns = perf_counter_ns()
        except _TRANSPORT_ERRORS as exc:
            record.fail(*translate(exc))


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
