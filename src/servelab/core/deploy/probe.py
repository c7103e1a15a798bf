"""The answer to one HTTP probe (a readiness or health GET, a chat completion): a fact the
deploy steps, verify's checks and ``status`` carry (pure; :func:`servelab.io.http.client.probe`
makes one)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from servelab.core.printable import printable
from servelab.core.redacted import StoredText, StoredUrl
from servelab.core.redaction import redact

__all__ = ["ProbeResult", "html_summary", "quoted"]

_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def html_summary(body: str) -> str | None:
    """``(HTML page "Title")`` for an HTML body (never quoted raw), else None."""
    head = body.lstrip()[:200].lower()
    if not head.startswith(("<!doctype html", "<html")):
        return None
    title = _TITLE.search(body)
    name = redact(" ".join(title.group(1).split()))[:80] if title else ""
    return f'(HTML page "{name}")' if name else "(HTML page)"


#: The most characters of an answer's body a line quotes.
QUOTED_CHARS = 160


def quoted(body: str) -> str:
    """An answer's body as one line quotes it: on one line, secrets masked (the one redaction
    policy, before the cut, so no token is cut out of its shape), its first
    :data:`QUOTED_CHARS` characters, its control characters escaped (an ``ESC`` from the network
    never reaches a terminal: :func:`~servelab.core.printable.printable`)."""
    return printable(redact(" ".join(body.split()))[:QUOTED_CHARS])


@dataclass(frozen=True)
class ProbeResult:
    """The answer to one probe: ``status`` None means no HTTP answer (see ``error``). What the
    engine said is quoted through the one redaction policy: ``url`` encoded (``--json``, the
    ledger, ``ledger export``) with a password in it masked, ``body`` and ``error`` with what
    :func:`~servelab.core.redaction.redact` finds in them (a token in a ``/health`` body), and
    :meth:`describe` the same; the parsers (a worker list, a metric page) read the real body."""

    url: StoredUrl
    status: int | None
    body: StoredText
    elapsed_s: float
    error: StoredText | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    def describe(self) -> str:
        """A one-line summary: ``HTTP 503 {"status":"starting"}`` or ``no answer: <error>``."""
        if self.status is None:
            return f"no answer: {redact(self.error or '')}"
        snippet = html_summary(self.body) or quoted(self.body)
        return f"HTTP {self.status} {snippet}".rstrip()
