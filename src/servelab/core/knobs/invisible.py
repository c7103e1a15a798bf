"""Characters a knob value must not hide (pure): Unicode format and control characters.

A zero-width space (U+200B), a byte order mark (U+FEFF), a bidi control (U+202E, U+2066...), a
soft hyphen or a control character is invisible in a terminal: ``5\\u200b12`` looks like ``512``,
and an engine reads neither as 512. :func:`invisible_at` finds the first one (the knob commands
refuse such a value, naming the position); :func:`escape_invisible` writes each one as its
``\\uXXXX`` escape, so a value already stored with one is shown with it rather than hiding it.
"""

from __future__ import annotations

import unicodedata

__all__ = ["INVISIBLE_CATEGORIES", "escape_invisible", "invisible_at", "name_of"]

#: Unicode categories whose characters are not seen: format (Cf: zero-width, bidi controls, BOM,
#: soft hyphen), control (Cc), line and paragraph separators (Zl, Zp).
INVISIBLE_CATEGORIES = frozenset({"Cf", "Cc", "Zl", "Zp"})


def _invisible(char: str) -> bool:
    return unicodedata.category(char) in INVISIBLE_CATEGORIES


def invisible_at(text: str) -> tuple[int, str] | None:
    """The first invisible character of ``text``: its 1-based position and the character."""
    for at, char in enumerate(text, start=1):
        if _invisible(char):
            return at, char
    return None


def name_of(char: str) -> str:
    """``U+200B ZERO WIDTH SPACE`` (a control character has no name: ``U+0009``)."""
    name = unicodedata.name(char, "")
    code = f"U+{ord(char):04X}"
    return f"{code} {name}" if name else code


def escape_invisible(text: str) -> str:
    """``text`` with each invisible character written as its escape (``\\u200b``, ``\\t``)."""
    if not any(_invisible(c) for c in text):
        return text
    return "".join(_escape(c) if _invisible(c) else c for c in text)


def _escape(char: str) -> str:
    named = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
    if char in named:
        return named[char]
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
