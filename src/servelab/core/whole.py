"""The one parser of a whole number a user types (pure): ``--requests``, ``--repeat``,
``--max-rounds``, a seed, a count. Each option states what it expects (``a whole number from 1
to 1,000``); a text that is not a whole number, or one out of its bounds, is an
:class:`~servelab.errors.OptionError` saying ``expected ..., got '...'``, the text quoted and cut
to its first 24 characters (not 400 digits).
"""

from __future__ import annotations

from servelab.errors import OptionError

__all__ = ["echoed", "parse_whole"]


def echoed(text: str) -> str:
    """The text as typed, quoted, cut to its first 24 characters (not 400 digits)."""
    return repr(text) if len(text) <= 24 else f"{text[:24]!r}… ({len(text):,} characters)"


def parse_whole(text: str, expected: str, low: int | None = None, high: int | None = None) -> int:
    """``text`` as a whole number from ``low`` to ``high`` (None: unbounded on that side), else
    an OptionError ``expected {expected}, got {text}``."""
    try:
        value = int(text)
    except ValueError:  # a float, a word, or past Python's 4,300-digit limit
        raise OptionError(f"expected {expected}, got {echoed(text)}") from None
    if (low is not None and value < low) or (high is not None and value > high):
        raise OptionError(f"expected {expected}, got {echoed(text)}")
    return value
