"""The HTTP client for everything servelab sends: probes, JSON GETs, timestamped streams, keep-alive
sessions.

One function builds the aiohttp session (:func:`_session`) for probes and JSON GETs; the streams
go through :class:`~servelab.io.http.stream.StreamClient` (a raw asyncio protocol, re-exported here:
this module stays the one HTTP seam callers import); :func:`translate`
(:mod:`servelab.io.http.neterrors`) is the one translation of aiohttp and OS errors. Nothing outside
``io/`` (and the simulator) touches aiohttp.

- :class:`HttpClient` (probes, :meth:`~HttpClient.get_json`, :meth:`~HttpClient.model_id`,
  :meth:`~HttpClient.model_list`: what answered ``GET /v1/models``): one
  keep-alive session a command holds and closes. Probes never raise for HTTP or transport failures
  (refused, reset, timeout, DNS): the :class:`ProbeResult` carries the error. The module-level
  :func:`probe`, :func:`get_json` and :func:`model_id` are for one-off callers (a session each).
- :class:`StreamClient`, :class:`Transfer`, :class:`Connections`, ``Chunks``: the streaming load
  client (see :mod:`servelab.io.http.stream`); :func:`chat_body` and :func:`completion_body` build
  its request bodies.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp

from servelab.core.deploy.probe import ProbeResult, html_summary
from servelab.io.http.neterrors import TRANSPORT_ERRORS as _TRANSPORT_ERRORS
from servelab.io.http.neterrors import translate

__all__ = [
    "BODY_LIMIT",
    "REDIRECTED",
    "HttpClient",
    "ModelList",
    "chat_body",
    "completion_body",
    "get_json",
    "model_id",
    "model_list",
    "oversize",
    "probe",
    "using_client",
]

#: Bodies are truncated to this many characters by default (enough for /health, /readiness,
#: error JSON); ``probe(..., body_limit=None)`` keeps the whole body (a JSON document, /metrics)
#: up to :data:`WHOLE_BODY_LIMIT` bytes.
BODY_LIMIT = 500
#: The most a whole body may hold: past it the read stops and the probe fails (an endless or
#: hostile answer never fills the memory). An engine's /metrics or worker list is far below it.
WHOLE_BODY_LIMIT = 64 * 2**20


def oversize(limit: int) -> str:
    """The error of a probe whose whole body is over ``limit`` bytes (``over 1 MiB``)."""
    size = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"
    return f"the answer's body is over {size}: not read further"


# ----------------------------------------------------------------------- the one session
def _session(limit: int) -> aiohttp.ClientSession:
    """The one place servelab builds an aiohttp session (probes and JSON GETs)."""
    connector = aiohttp.TCPConnector(limit=limit, limit_per_host=0, ttl_dns_cache=10)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None),
        cookie_jar=aiohttp.DummyCookieJar(),
    )


#: How a probe that does not follow redirects says it was redirected: ``redirected to LOCATION``
#: (the ``Location`` header as sent: redact it before showing it).
REDIRECTED = "redirected to "


# ---------------------------------------------------------------------------------- probes
class HttpClient:
    """``async with HttpClient() as http: await http.probe(url, timeout=5)``: one keep-alive
    session for a command's probes and JSON GETs (``aclose()`` when not used with ``async with``).
    """

    def __init__(self, *, limit: int = 100, proxy: str | None = None) -> None:
        self._limit = limit
        #: the forward proxy every request goes through (None: straight)
        self.proxy = proxy
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
        whole_limit: int = WHOLE_BODY_LIMIT,
        follow_redirects: bool = True,
    ) -> ProbeResult:
        """Send one request to ``url`` and report status, body and elapsed time.

        The body is cut to ``body_limit`` characters; None keeps all of it, up to ``whole_limit``
        bytes (past them the probe fails: :func:`oversize`). ``timeout`` bounds the whole
        exchange, body included. ``follow_redirects=False``: a redirect (3xx) is the answer,
        its body empty and its ``error`` :func:`redirected` to its ``Location``.
        """
        start = time.perf_counter()
        limit = aiohttp.ClientTimeout(total=timeout)
        try:
            async with self._open().request(
                method, url, json=json_body, headers=headers, timeout=limit, proxy=self.proxy,
                allow_redirects=follow_redirects,
            ) as response:  # fmt: skip
                status = response.status
                if not follow_redirects and 300 <= status < 400:
                    where = response.headers.get("Location", "")
                    return ProbeResult(url, status, "", time.perf_counter() - start,
                                       REDIRECTED + where)  # fmt: skip
                body = await _read_body(response, body_limit, whole_limit)
        except (*_TRANSPORT_ERRORS, ValueError) as exc:
            error = translate(exc, timeout_s=timeout)[1]
            return ProbeResult(url, None, "", time.perf_counter() - start, error)
        return ProbeResult(url, status, body, time.perf_counter() - start)

    async def get_json(
        self, url: str, *, timeout: float = 5.0, headers: Mapping[str, str] | None = None
    ) -> Any:
        """GET a JSON document in full (with ``headers``); None on any failure (no answer, not
        200, not JSON)."""
        sent = None if headers is None else dict(headers)
        result = await self.probe(url, timeout=timeout, body_limit=None, headers=sent)
        if result.status != 200:
            return None
        try:
            return json.loads(result.body)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than a parser goes
            return None

    async def model_id(
        self, base_url: str, timeout: float = 10.0, headers: Mapping[str, str] | None = None
    ) -> str | None:
        """The first model ``GET /v1/models`` (with ``headers``) lists; None when it cannot be
        read."""
        url = base_url.rstrip("/") + "/v1/models"
        doc = await self.get_json(url, timeout=timeout, headers=headers)
        try:
            return str(doc["data"][0]["id"])
        except (KeyError, IndexError, TypeError):
            return None

    async def model_list(
        self, base_url: str, timeout: float = 10.0, headers: Mapping[str, str] | None = None
    ) -> ModelList:
        """What answered ``GET <base_url>/v1/models`` (with ``headers``): an OpenAI model list,
        or what else."""
        url = base_url.rstrip("/") + "/v1/models"
        limit = aiohttp.ClientTimeout(total=timeout)
        sent = None if headers is None else dict(headers)
        try:
            async with self._open().get(
                url, timeout=limit, headers=sent, proxy=self.proxy
            ) as response:
                body = await _read_body(response, 64 * 1024)
                status, content_type = response.status, response.content_type
        except (*_TRANSPORT_ERRORS, ValueError) as exc:
            return ModelList(url, None, None, None, translate(exc, timeout_s=timeout)[1])
        try:
            doc = json.loads(body)
            models = tuple(str(item["id"]) for item in doc["data"])
        except (ValueError, KeyError, TypeError, RecursionError):
            models, doc = None, None
        context = _context_length(doc) if models else None
        return ModelList(url, status, content_type, models, None, html_summary(body), context)


def _context_length(doc: Any) -> int | None:
    """The first model's ``max_model_len`` (SGLang's and vLLM's model card; None: not said)."""
    value = doc["data"][0].get("max_model_len") if isinstance(doc["data"][0], dict) else None
    return value if type(value) is int and value > 0 else None


@dataclass(frozen=True)
class ModelList:
    """The answer to ``GET /v1/models``: ``models`` is None unless it is an OpenAI model list."""

    url: str
    status: int | None
    content_type: str | None
    models: tuple[str, ...] | None
    error: str | None = None
    html: str | None = None
    #: the first model's context length (``max_model_len``), when the list says it
    context_length: int | None = None

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


async def _read_body(
    response: aiohttp.ClientResponse, limit: int | None, whole_limit: int = WHOLE_BODY_LIMIT
) -> str:
    if limit is None:
        whole = bytearray()
        async for chunk in response.content.iter_chunked(1 << 16):
            whole += chunk
            if len(whole) > whole_limit:
                raise aiohttp.ClientPayloadError(oversize(whole_limit))
        return whole.decode("utf-8", "replace")
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


async def model_list(
    base_url: str,
    timeout: float = 10.0,
    headers: Mapping[str, str] | None = None,
    proxy: str | None = None,
) -> ModelList:
    """One ``GET /v1/models`` on a client of its own (through ``proxy``, if given; see
    :meth:`HttpClient.model_list`)."""
    async with HttpClient(limit=1, proxy=proxy) as http:
        return await http.model_list(base_url, timeout, headers)


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
