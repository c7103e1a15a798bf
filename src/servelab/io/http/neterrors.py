"""The one translation of transport errors (aiohttp's and the OS's) into record failure reasons.

Both clients use it: :mod:`servelab.io.http.client` (aiohttp: probes, JSON GETs) and
:mod:`servelab.io.http.stream` (the raw streaming protocol: OS errors only).
"""

from __future__ import annotations

import aiohttp

from servelab.core.load.records import REASON_CONNECTION, REASON_TRUNCATED

__all__ = ["TRANSPORT_ERRORS", "translate"]

#: What the clients catch and translate (OSError covers refused, reset, DNS and timeouts).
TRANSPORT_ERRORS = (aiohttp.ClientError, OSError)


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
