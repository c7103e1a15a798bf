"""A name as the redaction policy reads it (:func:`servelab.core.secretnames.is_secret_name`):
``pаssword`` with a Cyrillic ``а``, ``ＡＰＩ_ＫＥＹ`` in full-width letters and ``pass\u200bword``
with a zero-width space look like ``password`` to a reader, so they are read as it.

:func:`fold` applies Unicode's compatibility decomposition (NFKD: full-width and other
compatibility letters to their plain forms, an accented letter to its letter and its accent),
drops format characters (zero-width spaces and joiners, the soft hyphen, the byte order mark)
and marks (``pa\u0301ssword``, the combining grapheme joiner, variation selectors), and maps the
letters of other scripts that are drawn like a Latin letter to it (a subset of Unicode's
``confusables.txt``: the Cyrillic, Greek and Armenian letters whose prototype is one Latin
letter, and the small capitals ``ᴘ``, ``ᴋ``). Only names are folded, for the match; a value is
shown and replaced as it is written.
"""

from __future__ import annotations

import unicodedata

__all__ = ["fold"]

#: Letters drawn like one Latin letter, by that letter (lower and upper case).
_LIKE = {
    "a": "аɑαａ", "c": "сϲ", "d": "ԁ", "e": "еҽ", "g": "ɡ", "h": "һ", "i": "іιɩ", "j": "ј",
    "k": "κ", "l": "ӏ", "n": "ո", "o": "оοσօ", "p": "рρ", "q": "ԛ", "r": "г", "s": "ѕ",
    "u": "υս", "v": "ν", "w": "ԝ", "x": "хχ", "y": "уγ",
    "A": "АΑ", "B": "ВΒ", "C": "СϹ", "E": "ЕΕ", "H": "НΗ", "I": "ІΙӀ", "J": "Ј", "K": "КΚ",
    "M": "МΜ", "N": "Ν", "O": "ОΟ", "P": "РΡ", "S": "Ѕ", "T": "ТΤ", "X": "ХΧ", "Y": "ҮΥ",
    "Z": "Ζ",
}  # fmt: skip
#: Small capital letters (``ᴘassword``), drawn like a lower-case Latin letter.
_SMALL_CAPITALS = {
    "a": "ᴀ", "b": "ʙ", "c": "ᴄ", "d": "ᴅ", "e": "ᴇ", "f": "ꜰ", "g": "ɢ", "h": "ʜ", "i": "ɪ",
    "j": "ᴊ", "k": "ᴋ", "l": "ʟ", "m": "ᴍ", "n": "ɴ", "o": "ᴏ", "p": "ᴘ", "r": "ʀ", "s": "ꜱ",
    "t": "ᴛ", "u": "ᴜ", "v": "ᴠ", "w": "ᴡ", "y": "ʏ", "z": "ᴢ",
}  # fmt: skip
_LIKE = {latin: others + _SMALL_CAPITALS.get(latin, "") for latin, others in _LIKE.items()} | {
    latin: small for latin, small in _SMALL_CAPITALS.items() if latin not in _LIKE
}
#: Categories dropped: format characters (zero-width, soft hyphen, BOM) and the marks a
#: decomposition leaves (an accent, a combining mark, a variation selector).
_UNSEEN = frozenset({"Cf", "Mn", "Me"})
_TABLE = str.maketrans({other: latin for latin, others in _LIKE.items() for other in others})


def fold(name: str) -> str:
    """``name`` as it reads (see the module doc); an ASCII name is returned as it is."""
    if name.isascii():
        return name
    plain = unicodedata.normalize("NFKD", name)
    shown = "".join(c for c in plain if unicodedata.category(c) not in _UNSEEN)
    return unicodedata.normalize("NFKC", shown.translate(_TABLE))
