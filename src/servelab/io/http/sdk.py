"""Chat requests through the official OpenAI SDK (``soak --client openai``): what a user's agent
sends and sees.

:class:`SdkClient` is one session's client: an ``openai.AsyncOpenAI`` with the SDK's own httpx
connection pool, timeouts and retries (``max_retries`` 2, its default), the soak's request
headers as its default headers. :meth:`SdkClient.transfer` posts one chat request and returns
what came back as a :class:`~servelab.io.http.transfer.Transfer`, exactly as the raw stream client
does: each streamed chunk re-encoded as the SSE event it arrived as, stamped with its arrival, so
the soak decodes both clients' answers with the same code. The SDK's errors are translated here:
an error status (after the SDK's own retries) into the record's HTTP failure with its body, a
connection error or the SDK's timeout into a connection failure, an error inside the stream into
a server error; no byte for the idle timeout (the head, or between two chunks) is the idle
failure. Every answer the SDK's pool receives is seen by an httpx response hook: each one it
did not hand back (it retried after it: a 429, a 5xx) is a
:class:`~servelab.io.http.transfer.Resend` with its status (the SDK masked a failure), with how
long the session had been idle before the request.

The ``openai`` package (the ``openai`` extra) costs seconds to import, so it is imported when a
client is entered, never by the CLI's start.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from time import perf_counter_ns
from types import TracebackType
from typing import Any

from servelab.core.load.records import (
    REASON_CONNECTION,
    REASON_IDLE,
    REASON_INTERRUPTED,
    REASON_SERVER_ERROR,
    RequestRecord,
    http_reason,
)
from servelab.errors import ServelabError
from servelab.io.http.transfer import Resend, Transfer

__all__ = ["SdkClient", "SdkMissing"]

_ERROR_BODY_MAX = 2048
#: The SDK's own timeout, as a multiple of the idle timeout: long enough that the idle watchdog
#: here decides a stall, not the SDK (which would retry it).
_SDK_TIMEOUT_FACTOR = 3.0


class SdkMissing(ServelabError, ImportError):
    """``--client openai`` without the ``openai`` package installed."""


class SdkClient:
    """``async with SdkClient(url, idle_s=30, headers={...}) as c: await c.transfer(...)``."""

    def __init__(
        self,
        base_url: str,
        *,
        idle_timeout_s: float,
        headers: Mapping[str, str],
        proxy: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        #: the forward proxy (None: straight; the environment is not read again here: the route
        #: was decided by :func:`servelab.core.load.proxyroute.route`, httpx's own rule)
        self.proxy = proxy
        self._idle_s = idle_timeout_s
        self._headers = dict(headers)
        self._sdk: Any = None
        #: each request's answers' statuses, in order (by its x-request-id)
        self._attempts: dict[str, list[int]] = {}
        self._idle_since: float | None = None
        self._errors: tuple[type[Exception], ...] = ()
        self._last_idle_s = 0.0

    async def __aenter__(self) -> SdkClient:
        try:
            import openai  # the SDK costs seconds to import: only a soak that uses it pays
        except ImportError as exc:
            raise SdkMissing(
                "--client openai needs the OpenAI SDK: pip install 'servelab[openai]'"
            ) from exc

        async def sent(request: Any) -> None:
            self._attempts.setdefault(request.headers.get("x-request-id", ""), [])

        async def answered(response: Any) -> None:
            rid = response.request.headers.get("x-request-id", "")
            self._attempts.setdefault(rid, []).append(response.status_code)

        hooks: dict[str, list[Callable[[Any], Awaitable[None]]]] = {
            "request": [sent], "response": [answered],
        }  # fmt: skip
        http = openai.DefaultAsyncHttpxClient(event_hooks=hooks, proxy=self.proxy, trust_env=False)
        self._sdk = openai.AsyncOpenAI(
            base_url=self.base_url + "/v1",
            api_key="servelab",
            default_headers=self._headers,
            timeout=self._idle_s * _SDK_TIMEOUT_FACTOR,
            http_client=http,
        )
        self._errors = (openai.APIStatusError, openai.APIConnectionError, openai.APIError)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._sdk is not None:
            await self._sdk.close()
            self._sdk = None

    @property
    def idle_s(self) -> float:
        """Seconds since the last answer ended (0 before the first request)."""
        return 0.0 if self._idle_since is None else time.monotonic() - self._idle_since

    @property
    def last_idle_s(self) -> float:
        """How long the session had been idle before its last request."""
        return self._last_idle_s

    async def transfer(self, path: str, body: bytes, record: RequestRecord) -> Transfer:
        """POST ``body`` (a chat request; ``path`` is the chat completions path the SDK knows)
        through the SDK; everything that came back, undecoded, failures in ``record``."""
        if self._sdk is None:
            raise RuntimeError("SdkClient used outside 'async with'")
        got = Transfer(record)
        doc: dict[str, Any] = json.loads(body)
        idle = self._last_idle_s = self.idle_s
        record.sent_ns = perf_counter_ns()
        try:
            await self._exchange(doc, got)
        except asyncio.CancelledError:
            record.fail(REASON_INTERRUPTED, "cancelled")
            raise
        finally:
            got.resends += self._resends(record.request_id, idle)
            record.end_ns = record.end_ns or perf_counter_ns()
            self._idle_since = time.monotonic()
        return got

    def _resends(self, request_id: str, idle_s: float) -> list[Resend]:
        """Every answer the SDK did not hand back (it retried after it): one resend each, with
        its status; an attempt that got no answer (a connection error) is one without."""
        statuses = self._attempts.pop(request_id, [])
        retried = statuses[:-1] if statuses else []
        return [Resend(round(idle_s, 3), before_send=False, status=s) for s in retried]

    async def _exchange(self, doc: dict[str, Any], got: Transfer) -> None:
        record = got.record
        identity = {"x-request-id": record.request_id}
        if record.traceparent:
            identity["traceparent"] = record.traceparent
        stream = bool(doc.pop("stream", False))
        model, messages = doc.pop("model"), doc.pop("messages")
        create = self._sdk.chat.completions.with_raw_response.create
        try:
            async with asyncio.timeout(self._idle_s):
                raw = await create(
                    model=model, messages=messages, stream=stream, extra_headers=identity,
                    extra_body=doc,
                )  # fmt: skip
            record.first_byte_ns, record.status = perf_counter_ns(), raw.status_code
            got.headers = {k.lower(): v for k, v in raw.headers.items()}
            if stream:
                await self._chunks(raw.parse(), got)
            else:
                got.chunks.append((perf_counter_ns(), raw.content))
        except TimeoutError:
            record.fail(REASON_IDLE, "no bytes from the server within the idle timeout")
        except self._errors as exc:
            self._failed(exc, got)

    async def _chunks(self, chunks: Any, got: Transfer) -> None:
        """Each chunk as the SSE event it came as, stamped; the idle timeout between two."""
        it = chunks.__aiter__()
        while True:
            async with asyncio.timeout(self._idle_s):
                try:
                    chunk = await it.__anext__()
                except StopAsyncIteration:
                    break
            data = json.dumps(chunk.model_dump(exclude_unset=True))
            got.chunks.append((perf_counter_ns(), f"data: {data}\n\n".encode()))
        got.chunks.append((perf_counter_ns(), b"data: [DONE]\n\n"))

    @staticmethod
    def _failed(exc: Exception, got: Transfer) -> None:
        record = got.record
        response = getattr(exc, "response", None)
        status = getattr(exc, "status_code", None)
        if isinstance(status, int) and response is not None:
            record.first_byte_ns, record.status = record.first_byte_ns or perf_counter_ns(), status
            got.headers = {k.lower(): v for k, v in response.headers.items()}
            got.error_body = response.content[:_ERROR_BODY_MAX]
            record.fail(http_reason(status), got.error_body.decode("utf-8", "replace"))
        elif record.first_byte_ns is not None:  # an error event inside the stream
            record.fail(REASON_SERVER_ERROR, str(exc)[:_ERROR_BODY_MAX])
        else:
            record.fail(REASON_CONNECTION, f"{type(exc).__name__}: {exc}"[:_ERROR_BODY_MAX])
