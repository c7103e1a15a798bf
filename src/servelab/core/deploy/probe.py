"""The answer to one HTTP probe (a readiness or health GET, a chat completion): a fact the
deploy steps, verify's checks and ``status`` carry (pure; :func:`servelab.io.http.client.probe`
makes one)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from servelab.core.redaction import StoredUrl

__all__ = ["ProbeResult", "html_summary"]

_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def html_summary(body: str) -> str | None:
    """``(HTML page "Title")`` for an HTML body (never quoted raw), else None."""
    head = body.lstrip()[:200].lower()
    if not head.startswith(("<!doctype html", "<html")):
        return None
    title = _TITLE.search(body)
    name = " ".join(title.group(1).split())[:80] if title else ""
    return f'(HTML page "{name}")' if name else "(HTML page)"


@dataclass(frozen=True)
class ProbeResult:
    """The answer to one probe: ``status`` None means no HTTP answer (see ``error``); ``url``
    encoded (``--json``, the ledger) with a password in it masked."""

    url: StoredUrl
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
        snippet = html_summary(self.body) or " ".join(self.body.split())[:160]
        return f"HTTP {self.status} {snippet}".rstrip()
