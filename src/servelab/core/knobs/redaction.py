"""A service's env values kept out of the text servelab shows, stores and exports about it.

A service may print its own environment (``start = "sh -c 'echo token $HF_TOKEN; exit 1'"``): the
tail of its log, quoted when it fails to start, would carry the token to the terminal, ``--json``
and the ledger. :func:`redact` replaces every value of the service's env file in such text by
:data:`REDACTED` before it leaves. A value shorter than :data:`MIN_REDACTED_CHARS` is left: it
cannot be told from the ordinary words and numbers of a log line (``true``, ``512``), and replacing
it would blank them all while hiding nothing a reader could not guess. A value never spans lines
(an env file holds one per line), so a tail that starts with whole lines holds no value cut in two.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["MIN_REDACTED_CHARS", "REDACTED", "redact"]

#: What an env value is replaced by.
REDACTED = "***"
#: The shortest value replaced.
MIN_REDACTED_CHARS = 6


def _secrets(values: Iterable[str]) -> list[str]:
    """The values to replace, longest first (a value that holds another is replaced whole)."""
    kept = {value for value in values if len(value) >= MIN_REDACTED_CHARS}
    return sorted(kept, key=len, reverse=True)


def redact(text: str, values: Iterable[str]) -> str:
    """``text`` with every one of ``values`` (at least :data:`MIN_REDACTED_CHARS` long) replaced
    by :data:`REDACTED`."""
    for secret in _secrets(values):
        text = text.replace(secret, REDACTED)
    return text
