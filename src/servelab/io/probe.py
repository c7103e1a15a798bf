"""HTTP probes: one request, and a result that says what happened. Never raises for HTTP or
transport failures (refused, reset, timeout, DNS): the :class:`ProbeResult` carries the error.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp

__all__ = ["BODY_LIMIT", "ProbeResult", "probe"]

#: Bodies are truncated to this many characters by default (enough for /health, /readiness,
#: error JSON); ``probe(..., body_limit=None)`` keeps the whole body (a JSON document, /metrics).
BODY_LIMIT = 500


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
        snippet = " ".join(self.body.split())[:160]
        return f"HTTP {self.status} {snippet}".rstrip()

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


async def probe(
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
    client_timeout = aiohttp.ClientTimeout(total=timeout)
    try:
        async with (
            aiohttp.ClientSession(timeout=client_timeout) as session,
            session.request(method, url, json=json_body, headers=headers) as response,
        ):
            body = await _read_body(response, body_limit)
            status = response.status
    except TimeoutError:
        return ProbeResult(
            url, None, "", time.perf_counter() - start, f"timed out after {timeout}s"
        )
    except aiohttp.ClientError as exc:
        return ProbeResult(url, None, "", time.perf_counter() - start, _describe(exc))
    except (OSError, ValueError) as exc:
        return ProbeResult(url, None, "", time.perf_counter() - start, _describe(exc))
    return ProbeResult(url, status, body, time.perf_counter() - start)


async def _read_body(response: aiohttp.ClientResponse, limit: int | None) -> str:
    if limit is None:
        return (await response.read()).decode("utf-8", "replace")
    raw = await response.content.read(limit * 4)
    return raw.decode("utf-8", "replace")[:limit]


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]
