"""Characters a knob value must not hide (pure): Unicode format and control characters, spaces
other than the ASCII one, and the characters that draw as nothing.

A zero-width space (U+200B), a byte order mark (U+FEFF), a bidi control (U+202E, U+2066...), a
soft hyphen or a control character is invisible in a terminal: ``5\\u200b12`` looks like ``512``,
and an engine reads neither as 512. So are a no-break or ideographic space (U+00A0, U+3000: any
space separator but the ASCII space), a variation selector or the combining grapheme joiner
(U+FE0F, U+034F), the Khmer inherent vowels (U+17B4, U+17B5), the Hangul fillers (U+115F, U+1160,
U+3164, U+FFA0) and the blank braille pattern (U+2800): letters or marks by category, blank on
screen. :func:`invisible_at` finds the first one (the knob commands
refuse such a value, naming the position); :func:`escape_invisible` writes each one as its
``\\uXXXX`` escape, so a value already stored with one is shown with it rather than hiding it.
"""

from __future__ import annotations

import unicodedata

__all__ = [
    "BLANK_CHARACTERS",
    "INVISIBLE_CATEGORIES",
    "escape_invisible",
    "invisible_at",
    "name_of",
]

#: Unicode categories whose characters are not seen: format (Cf: zero-width, bidi controls, BOM,
#: soft hyphen), control (Cc), line and paragraph separators (Zl, Zp).
INVISIBLE_CATEGORIES = frozenset({"Cf", "Cc", "Zl", "Zp"})
#: Characters of other categories that draw as nothing: the combining grapheme joiner, the
#: Khmer inherent vowels, the Hangul fillers and the blank braille pattern.
BLANK_CHARACTERS = frozenset("\u034f\u17b4\u17b5\u115f\u1160\u3164\uffa0\u2800")


#: The Mongolian free variation selectors (the others are U+FE00-FE0F and U+E0100-E01EF).
_MONGOLIAN_SELECTORS = frozenset({0x180B, 0x180C, 0x180D, 0x180F})


def _variation_selector(code: int) -> bool:
    return 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF or code in _MONGOLIAN_SELECTORS


def _invisible(char: str) -> bool:
    category = unicodedata.category(char)
    if category in INVISIBLE_CATEGORIES or char in BLANK_CHARACTERS:
        return True
    if category == "Zs":
        return char != " "
    return category == "Mn" and _variation_selector(ord(char))


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
