"""The one parser of a whole number a user types (pure): ``--requests``, ``--repeat``,
``--max-rounds``, a seed, a count. Each option states what it expects (``a whole number from 1
to 1,000``); a text that is not a whole number, or one out of its bounds, is an
:class:`~servelab.errors.OptionError` saying ``expected ..., got '...'``, the text quoted and cut
to its first 24 characters (not 400 digits).
"""

from __future__ import annotations

from servelab.errors import OptionError

__all__ = [
    "ascii_float",
    "ascii_int",
    "comma_count",
    "comma_items",
    "echoed",
    "parse_whole",
    "plain_digits",
]


def echoed(text: str) -> str:
    """The text as typed, quoted, cut to its first 24 characters (not 400 digits)."""
    return repr(text) if len(text) <= 24 else f"{text[:24]!r}… ({len(text):,} characters)"


def plain_digits(text: str) -> bool:
    """``text`` is written as a script or a shell writes a number: ASCII, and no ``_`` (Python's
    ``int`` and ``float`` read ``1_000`` as 1000, no other tool does)."""
    return text.isascii() and "_" not in text


def ascii_int(text: str) -> int:
    """``int(text)`` of ASCII text only (ValueError otherwise): ``int`` reads any script's
    digits, so a full-width ``１`` was taken as 1 and an Arabic-Indic ``٣`` as 3; and Python's
    digit groups, ``1_000`` (:func:`plain_digits`)."""
    if not plain_digits(text):
        raise ValueError(text)
    return int(text)


def ascii_float(text: str) -> float:
    """``float(text)`` of ASCII text only (ValueError otherwise): ``float`` reads any script's
    digits too (``--rate ٣`` ran at 3 requests a second, a full-width ``１.５`` was 1.5), and
    digit groups (:func:`plain_digits`)."""
    if not plain_digits(text):
        raise ValueError(text)
    return float(text)


def comma_count(text: str) -> int:
    """How many items :func:`comma_items` would give (an empty one counted), counted without
    splitting: a list's length is bounded before 20,000 items are built."""
    return text.count(",") + (0 if "," in text and text.rstrip().endswith(",") else 1)


def comma_items(text: str) -> list[str]:
    """The items of a comma-separated list (``4,8``; one trailing comma allowed: ``4, 8,``);
    ValueError for an empty one before the last (``1,,2``, ``,4``: a level lost, not skipped)."""
    items = text.split(",")
    if len(items) > 1 and not items[-1].strip():
        items.pop()
    if any(not item.strip() for item in items):
        raise ValueError(text)
    return items


def parse_whole(text: str, expected: str, low: int | None = None, high: int | None = None) -> int:
    """``text`` as a whole number from ``low`` to ``high`` (None: unbounded on that side), else
    an OptionError ``expected {expected}, got {text}``."""
    try:
        value = ascii_int(text)
    except ValueError:  # a float, a word, another script's digits, past 4,300 digits
        raise OptionError(f"expected {expected}, got {echoed(text)}") from None
    if (low is not None and value < low) or (high is not None and value > high):
        raise OptionError(f"expected {expected}, got {echoed(text)}")
    return value
