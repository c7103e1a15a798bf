"""A name as the redaction policy reads it (:func:`servelab.core.redaction.is_secret_name`):
``pаssword`` with a Cyrillic ``а``, ``ＡＰＩ_ＫＥＹ`` in full-width letters and ``pass\u200bword``
with a zero-width space look like ``password`` to a reader, so they are read as it.

:func:`fold` applies Unicode's compatibility normalisation (NFKC: full-width and other
compatibility letters to their plain forms), drops format characters (zero-width spaces and
joiners, the byte order mark) and maps the letters of other scripts that are drawn like a Latin
letter to it (a subset of Unicode's ``confusables.txt``: the Cyrillic, Greek and Armenian letters
whose prototype is one Latin letter). Only names are folded, for the match; a value is shown and
replaced as it is written.
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
_TABLE = str.maketrans({other: latin for latin, others in _LIKE.items() for other in others})


def fold(name: str) -> str:
    """``name`` as it reads (see the module doc); an ASCII name is returned as it is."""
    if name.isascii():
        return name
    plain = unicodedata.normalize("NFKC", name)
    shown = "".join(c for c in plain if unicodedata.category(c) != "Cf")
    return shown.translate(_TABLE)
