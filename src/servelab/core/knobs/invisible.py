"""Characters a knob value must not hide (pure), decided by their Unicode properties, not by a
list of examples.

A character is refused (:func:`invisible_at`) when a terminal does not show it as itself:

- its general category says so: format (Cf: zero-width characters, bidi controls such as
  U+202E, the BOM, the soft hyphen, the musical formatting characters), control (Cc), line and
  paragraph separators (Zl, Zp), private use (Co: U+E000-U+F8FF and the planes 15 and 16, drawn
  as whatever a font puts there, often nothing), surrogates (Cs) and code points not assigned
  (Cn); and any space separator (Zs) but the ASCII space (U+00A0, U+3000);
- it is a default ignorable code point (Unicode's ``Default_Ignorable_Code_Point``: the above
  Cf, the variation selectors, and ``Other_Default_Ignorable_Code_Point``:
  :data:`OTHER_DEFAULT_IGNORABLE`, such as the combining grapheme joiner U+034F, the Khmer
  inherent vowels and the Hangul fillers), which a renderer draws as nothing;
- its decomposition is a ``<noBreak>`` one (U+0F0C TIBETAN MARK DELIMITER TSHEG BSTAR, U+2011
  NON-BREAKING HYPHEN): drawn as the character it decomposes to, so it looks like another one;
- its reference glyph is blank (:data:`BLANK_CHARACTERS`: the blank braille pattern U+2800 and
  the musical symbol null notehead U+1D159, a spacer): the one class the Unicode Character
  Database has no property for, so it is named here.

``5\\u200b12`` looks like ``512``, and an engine reads neither as 512. :func:`invisible_at` finds
the first such character (the knob commands refuse such a value, naming the position);
:func:`escape_invisible` writes each one as its ``\\uXXXX`` escape, so a value (or a case's
title) already stored with one is shown with it rather than hiding it.
"""

from __future__ import annotations

import unicodedata

__all__ = [
    "BLANK_CHARACTERS",
    "INVISIBLE_CATEGORIES",
    "OTHER_DEFAULT_IGNORABLE",
    "escape_invisible",
    "invisible_at",
    "name_of",
]

#: Unicode categories whose characters are not seen as themselves: format (Cf), control (Cc),
#: line and paragraph separators (Zl, Zp), private use (Co), surrogates (Cs), unassigned (Cn).
INVISIBLE_CATEGORIES = frozenset({"Cf", "Cc", "Zl", "Zp", "Co", "Cs", "Cn"})
#: Unicode's ``Other_Default_Ignorable_Code_Point`` (``PropList.txt``, stable since 5.0), as
#: inclusive ranges; with Cf and the variation selectors it makes ``Default_Ignorable_Code_Point``.
OTHER_DEFAULT_IGNORABLE = (
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x2065, 0x2065), (0x3164, 0x3164),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0xE0000, 0xE0000), (0xE0002, 0xE001F),
    (0xE0080, 0xE00FF), (0xE01F0, 0xE0FFF),
)  # fmt: skip
#: Characters whose reference glyph is blank and which no Unicode property marks: the blank
#: braille pattern and the musical symbol null notehead (a spacer among noteheads).
BLANK_CHARACTERS = frozenset("\u2800\U0001d159")

#: The variation selectors: U+FE00-FE0F, U+E0100-E01EF and the Mongolian free ones.
_VARIATION_SELECTORS = ((0xFE00, 0xFE0F), (0xE0100, 0xE01EF), (0x180B, 0x180D), (0x180F, 0x180F))


def _within(code: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(low <= code <= high for low, high in ranges)


def _invisible(char: str) -> bool:
    category = unicodedata.category(char)
    if category in INVISIBLE_CATEGORIES or char in BLANK_CHARACTERS:
        return True
    if category == "Zs":
        return char != " "
    code = ord(char)
    if _within(code, OTHER_DEFAULT_IGNORABLE) or _within(code, _VARIATION_SELECTORS):
        return True
    return unicodedata.decomposition(char).startswith("<noBreak>")


def invisible_at(text: str) -> tuple[int, str] | None:
    """The first invisible character of ``text``: its 1-based position and the character."""
    for at, char in enumerate(text, start=1):
        if _invisible(char):
            return at, char
    return None


def name_of(char: str) -> str:
    """``U+200B ZERO WIDTH SPACE`` (a control character has no name: ``U+0009``); a no-break
    form says what it is drawn as (``U+2011 NON-BREAKING HYPHEN, drawn as U+2010``)."""
    name = unicodedata.name(char, "")
    code = f"U+{ord(char):04X}"
    named = f"{code} {name}" if name else code
    tag, _, drawn = unicodedata.decomposition(char).partition(" ")
    shown = tag == "<noBreak>" and drawn and unicodedata.category(char) != "Zs"  # not a space
    return f"{named}, drawn as U+{drawn}" if shown else named


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
