"""Free text a user types to be stored: a run's label, a case's title, a reason, a note.

It is stored in the ledger and printed back by ``case show``, ``case list``, the report and the
pages, so it goes through the one redaction policy (a ``sk-`` key pasted into a note is stored
``***``; line by line, so a secret masked to the end of its line never takes the lines after it),
its control characters become spaces (an escape sequence in a title would set the
terminal's title, a newline would forge a timeline line), every other invisible character is
written as its escape (:mod:`servelab.core.knobs.invisible`: a bidi override U+202E, which would
draw the rest of a title backwards, is stored ``\\u202e``), and it is at most
:data:`LONGEST_TEXT` characters (a usage error, exit 2, beyond).
"""

from __future__ import annotations

import re

import click

from servelab.core.knobs.invisible import escape_invisible
from servelab.core.redaction import redact

__all__ = ["LONGEST_TEXT", "stored_text"]

#: The most characters of one label, title, reason or note.
LONGEST_TEXT = 1000
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def stored_text(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: ``value`` as it may be stored and shown (see the module doc)."""
    if value is None:
        return None
    if len(value) > LONGEST_TEXT:
        raise click.BadParameter(f"{len(value):,} characters: at most {LONGEST_TEXT:,}")
    return escape_invisible(_redacted(value))


def _redacted(value: str) -> str:
    """``value`` redacted line by line, then on one line. A secret's rule masks to the end of
    its line: the lines are redacted before their breaks become spaces, or a secret on the first
    line would mask every line after it (``token=...`` cut a note there, in the ledger itself).
    The whole text is redacted first (a PEM key spans lines), then each line with its control
    characters made spaces (a secret split by one is still found)."""
    lines = redact(value).splitlines() or [""]
    return " ".join(redact(_CONTROL.sub(" ", line)) for line in lines)
