"""A secret typed in prose (part of the one redaction policy, :mod:`servelab.core.redaction`, which
calls :func:`mask_prose`):

- the word after a bare secret-looking word (``secret``, ``password``, ``pass``, ``psw``,
  ``token``, ``key``, ``api key``...), with blanks (and ``is``/``was``, a ``:``, ``;``, ``,``, a
  dash or an arrow: ``->``, ``==>``, ``⇒``, any Unicode arrow) between, quoted or not (a note's
  ``secret X``, ``my password is "X"``, ``password was: X``, ``token `X```, ``password ⇒ X``,
  ``pass X``);
- a word after a link (``is``, ``was``, ``to``, ``as``, ``:``, ``/``, a dash or an arrow)
  a few words on in the same clause (up to a sentence's end, a ``,`` or ``;``, a line's end):
  ``Password for user admin: X``, ``password changed to X``, ``the secret key is X``, ``Incorrect
  API key provided: X``, ``Login: bob / X``, ``login failed for admin/X``;

masked when it is shaped like a secret: letters and digits mixed and not a measure (``token
12.5ms/tok``, ``v2.1``), or a long run of letters of both cases and digits (an encoded key).
Prose stays: ``the secret sauce``, ``the password is strong enough``, ``password reset for
user42`` (no link before ``user42``), ``error: env/decode.env:3: ...`` (a file's name a few
words on). A pair in that word (``token kind=x``) is the key rule's.

- a word shaped like a generated secret, wherever it stands (:func:`generated`): ten or more
  letters and digits, upper and lower case and digits, and not made of words (its lower-case
  letters in short runs, not in words: ``Jw4nRt7yUi2o``); a model's class (``Qwen2ForCausalLM``,
  ``Wav2Vec2ForCTC``), a dtype (``Float8E4M3FN``), a hex id or hash (no capital), a version stay,
  and so does a pair's value (``X-Request-Id: X``, ``name=X``): its key says what it is, and the
  key rule masks it when that key is secret-looking.
"""

from __future__ import annotations

import re

__all__ = ["ARROWS", "PROSE_WORDS", "generated", "mask_prose", "shaped"]

#: Arrows of every Unicode block (``→``, ``⇒``, ``⟶``, ``➔``, ``⤏``, ``⮕``).
ARROWS = "\u2190-\u21ff\u2794-\u27bf\u27f0-\u27ff\u2900-\u297f\u2b00-\u2bff"
#: A separator of a word from what it says: ``:``, ``;``, ``,``, an ASCII arrow (``->``,
#: ``==>``), a Unicode one, a dash.
_SEPARATOR = rf"(?:-+>|=+>|[:;,{ARROWS}\-\u2013\u2014])"
#: A secret-looking word and the word after it (up to a quote or an angle bracket: an XML
#: element's ``<ns:Token kind="a">`` is no prose).
_BARE = re.compile(
    r"(?P<head>(?<![A-Za-z0-9])"
    r"(?i:secret|password|passwd|pwd|pswd?|passphrase|passcode|credentials?|creds|token"
    r"|api[ _-]?key|key)"
    r"(?:[^\S\n]+(?i:is|was))?"
    rf"(?:[^\S\n]*{_SEPARATOR}[^\S\n]*|[^\S\n]+)[\"'`]?)"
    r"(?P<value>[^\s*<>\"'`=][^\s<>\"'`]*)"
)
#: ``pass`` (a verb and a noun as often as a password's short name: ``the nineteenth pass,
#: H1/M2``): only a word of letters and digits after a blank or a ``:`` (``pass X``).
_PASS = re.compile(
    r"(?P<head>(?<![A-Za-z0-9_-])(?i:pass)(?:[^\S\n]*:[^\S\n]*|[^\S\n]+)[\"'`]?)"
    r"(?P<value>[A-Za-z0-9][^\s<>\"'`/]*)(?![^\s<>\"'`])"
)
#: A secret-looking word that starts a clause where a secret may stand a few words on (``pass``,
#: a verb as often as a noun, only says the word right after it).
_CLAUSE_HEAD = re.compile(
    r"(?<![A-Za-z0-9_])(?i:secret|password|passwd|pwd|pswd?|passphrase|passcode|credentials?"
    r"|creds|token|api[ _-]?key|key|login)(?![A-Za-z0-9])"
)
#: What ends a clause: a line's end, or a sentence's ``.``/``!``/``?`` or a ``,``/``;`` before a
#: blank or the end of the text.
_CLAUSE_END = re.compile(r"\n|[.!?,;](?=\s|\Z)")
#: How far a clause is read (characters, words): a few words, a bound on hostile lines.
_CLAUSE_CHARS, _CLAUSE_WORDS = 160, 8
#: What a clause holds when it may hold a secret: a digit or a long run (:func:`shaped`).
_CANDIDATE = re.compile(r"\d|\S{16}")
#: A word a few words on that names a file or a host, not a value: a path, a name with an
#: extension, a line number or a port after it (``env/decode.env:3``, ``db.example:5432``).
_FILE_LIKE = re.compile(r"(?:[/~]|\.{1,2}/).*|.*\.[A-Za-z][A-Za-z0-9]{0,7}(?::\d+)*:?")
#: The words and signs that link a secret-looking word to its value.
_LINK = re.compile(rf"(?i:is|was|are|to|as|be)|[:/]|{_SEPARATOR}+")
#: What may open a quoted value, and what ends a sentence after a word (never part of it).
_OPENING, _CLOSING = "\"'`([{", ".,;:!?)]}\"'`"
#: What a word after such a word may be without being its value: a number, with a unit or not
#: (``12.5ms/tok``, ``4096``, ``12%``), a version (``v2.1``).
_MEASURE = re.compile(r"[vV]?[\d.,:]+[A-Za-z/%\u00b5]*")
#: A long run of letters of both cases and digits, shaped like an encoded key.
_ENCODED_RUN = re.compile(r"(?=[^a-z]*[a-z])(?=[^A-Z]*[A-Z])[A-Za-z0-9+/=_~-]{16,}")
#: Words of prose, never a secret's value: after a secret flag, ``--password via the CLI``.
PROSE_WORDS = frozenset(
    {"a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "instead", "is",
     "must", "not", "of", "on", "only", "or", "the", "to", "via", "was", "when", "will", "with",
     "without"}
)  # fmt: skip
#: A run of ten or more letters and digits standing alone (a candidate generated secret).
_ALNUM_RUN = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]{10,}(?![A-Za-z0-9])")
#: A pair's key and separator just before a word (``Name: ``, ``name=``, ``"name": "``).
_PAIR_BEFORE = re.compile(r"[\w.-][\"']?[ \t]*[:=][ \t]*[\"']?\Z")
#: The parts of such a run: a capitalised or lower-case word, capitals, digits.
_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")


def shaped(value: str, shortest: int) -> bool:
    """Whether ``value`` is shaped like a secret (see the module doc): letters and digits mixed,
    at least ``shortest`` characters, not a measure; or a long encoded run."""
    if "=" in value.rstrip("="):  # ``token kind=x``: a pair, the key rule's
        return False
    mixed = any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
    if mixed and len(value) >= shortest and _MEASURE.fullmatch(value) is None:
        return True
    return _ENCODED_RUN.fullmatch(value) is not None


def generated(word: str) -> bool:
    """Whether ``word`` (letters and digits) is shaped like a generated secret: ten characters or
    more, upper and lower case and digits, and its lower-case letters mostly in runs of one or two
    (two such runs, or one and three runs of digits), not in words (``Qwen2ForCausalLM``)."""
    if len(word) < 10 or not word.isascii() or not word.isalnum():
        return False
    if word.isdigit() or word.isupper() or word.islower() or word.isalpha():
        return False
    parts = _PART.findall(word)
    short = sum(1 for part in parts if len(part) <= 2 and not part.isupper() and part.isalpha())
    digits = sum(1 for part in parts if part.isdigit())
    return short >= 2 or (short >= 1 and digits >= 3)


def _alone(match: re.Match[str]) -> bool:
    """A word shaped like a generated secret that is not a pair's value (``X-Request-Id: X``,
    ``name=X``: the key rule's, which masks it when its key is secret-looking)."""
    start = match.start()
    return generated(match.group(0)) and not _PAIR_BEFORE.search(
        match.string, max(0, start - 16), start
    )


def mask_prose(text: str, redacted: str, shortest: int) -> str:
    """``text`` with every word shaped like a secret (at least ``shortest`` characters, see the
    module doc) after a bare secret-looking word or a link in its clause, and every word shaped
    like a generated secret, replaced by ``redacted``; the punctuation that ends a sentence after
    it stays."""

    def masked(match: re.Match[str]) -> str:
        word = match.group("value")
        value = word.rstrip(_CLOSING)
        if not shaped(value, shortest):
            return match.group(0)
        return f"{match.group('head')}{redacted}{word[len(value) :]}"

    text = _PASS.sub(masked, _BARE.sub(masked, text))
    text = _ALNUM_RUN.sub(lambda m: redacted if _alone(m) else m.group(0), text)
    return _mask_clauses(text, redacted, shortest)


def _mask_clauses(text: str, redacted: str, shortest: int) -> str:
    spans: list[tuple[int, int]] = []
    read = 0  # where the clauses read so far end: a head inside one is read with it
    for head in _CLAUSE_HEAD.finditer(text):
        if head.start() < read:
            continue
        start = head.end()
        stop = _CLAUSE_END.search(text, start, start + _CLAUSE_CHARS)
        end = stop.start() if stop else min(len(text), start + _CLAUSE_CHARS)
        read, found = _clause_values(text, start, end, shortest)
        spans.extend(found)
    out: list[str] = []
    pos = 0
    for begin, until in sorted(set(spans)):
        if begin >= pos:
            out.append(text[pos:begin] + redacted)
            pos = until
    return "".join(out) + text[pos:]


def _clause_values(
    text: str, start: int, end: int, shortest: int
) -> tuple[int, list[tuple[int, int]]]:
    """Where the words read of a clause ``text[start:end]`` end, and the spans of the values it
    holds (see the module doc): a word shaped like a secret after a link, or after the ``/`` of
    ``user/X``."""
    found: list[tuple[int, int]] = []
    linked = False
    read = start
    if _CANDIDATE.search(text, start, end) is None:  # no digit, no long run: nothing to mask
        return end, found
    for count, word in enumerate(re.finditer(r"\S+", text[start:end])):
        if count >= _CLAUSE_WORDS:
            break
        read = start + word.end()
        raw = word.group(0)
        if _LINK.fullmatch(raw):
            linked = True
            continue
        lead = len(raw) - len(raw.lstrip(_OPENING))
        core = raw[lead:].rstrip(_CLOSING)
        at = start + word.start() + lead
        if _FILE_LIKE.fullmatch(core):
            pass  # ``error: env/decode.env:3: ...``: a file, not a value
        elif linked and shaped(core, shortest):
            found.append((at, at + len(core)))
        elif "/" in core[1:]:
            user, _, secret = core.rpartition("/")
            if user and shaped(secret, shortest):
                found.append((at + len(user) + 1, at + len(core)))
        linked = raw.rstrip(_CLOSING[-3:]).endswith((":", "/"))
    return read, found
