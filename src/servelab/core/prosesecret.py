"""A secret typed in prose (part of the one redaction policy, :mod:`servelab.core.redaction`, which
calls :func:`mask_prose`): the word after a bare secret-looking word, with blanks (and
``is``/``was``, a ``:``, a dash or an arrow) between, quoted or not (a note's ``secret X``, ``my
password is "X"``, ``password was: X``, ``token `X```, ``password - X``, ``api key X``), masked
when it is shaped like a secret: letters and digits mixed and not a measure (``token
12.5ms/tok``, ``v2.1``), or a long run of letters of both cases and digits (an encoded key).
Prose stays: ``the secret sauce``, ``the password is strong enough``. A pair in that word
(``token kind=x``) is the key rule's.
"""

from __future__ import annotations

import re

__all__ = ["mask_prose"]

#: A secret-looking word and the word after it (up to a quote or an angle bracket: an XML
#: element's ``<ns:Token kind="a">`` is no prose).
_BARE = re.compile(
    r"(?P<head>(?<![A-Za-z0-9])"
    r"(?i:secret|password|passwd|pwd|passphrase|passcode|credentials?|token|api[ _-]?key)"
    r"(?:[^\S\n]+(?i:is|was))?"
    r"(?:[^\S\n]*(?::|->|\u2192|-|\u2013|\u2014)[^\S\n]*|[^\S\n]+)[\"'`]?)"
    r"(?P<value>[^\s*<>\"'`=][^\s<>\"'`]*)"
)
#: What a word after such a word may be without being its value: a number, with a unit or not
#: (``12.5ms/tok``, ``4096``, ``12%``), a version (``v2.1``).
_MEASURE = re.compile(r"[vV]?[\d.,:]+[A-Za-z/%\u00b5]*")
#: A long run of letters of both cases and digits, shaped like an encoded key.
_ENCODED_RUN = re.compile(r"(?=[^a-z]*[a-z])(?=[^A-Z]*[A-Z])[A-Za-z0-9+/=_~-]{16,}")
#: What ends a sentence after a word, never part of its value.
_CLOSING = ".,;:!?)]}"


def _shaped(value: str, shortest: int) -> bool:
    if "=" in value.rstrip("="):  # ``token kind=x``: a pair, the key rule's
        return False
    mixed = any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
    if mixed and len(value) >= shortest and _MEASURE.fullmatch(value) is None:
        return True
    return _ENCODED_RUN.fullmatch(value) is not None


def mask_prose(text: str, redacted: str, shortest: int) -> str:
    """``text`` with every word shaped like a secret (at least ``shortest`` characters, see the
    module doc) after a bare secret-looking word replaced by ``redacted``; the punctuation that
    ends a sentence after it stays."""

    def masked(match: re.Match[str]) -> str:
        word = match.group("value")
        value = word.rstrip(_CLOSING)
        if not _shaped(value, shortest):
            return match.group(0)
        return f"{match.group('head')}{redacted}{word[len(value) :]}"

    return _BARE.sub(masked, text)
