"""Secrets in listed and connection-string forms (part of the one redaction policy,
:mod:`servelab.core.redaction`, which calls :func:`mask_listed`):

- an argument list as Python or JSON prints it (``CalledProcessError``'s
  ``Command '['python', '-m', 'x', '--api-key', 'SECRET']'``, ``["--password", "x"]``): the
  quoted element after a quoted secret-looking flag is masked, its quotes kept;
  ``['--port', '30000']`` stays;
- ODBC's ``Pwd=``/``PWD=`` in a ``;``-separated connection string
  (``Server=db;Uid=sa;Pwd=SECRET;``, ``PWD=SECRET;``, a ``{braced}`` value too): ``PWD`` alone
  is the shell's working directory, an ordinary name, so a path (``PWD=/home/user``,
  ``PWD=$HOME``) outside a string with a ``Server``/``Uid``/``Database``/``Driver`` key stays,
  and so do words after a spaced ``=`` (``pwd = the working directory``); else its first word
  is masked (``pwd=SECRET`` at the end of a line, ``user=u pwd=SECRET host=h``);
- markup: an XML element of a secret-looking name (``<password>X</password>``,
  ``<apiKey>X</apiKey>``, ``<ns:token a="b">X</ns:token>``, a CDATA section too), its text masked,
  its tags kept;
- a YAML key of a secret-looking name whose value is on the next lines (``api-key:`` then
  ``  sk-...`` indented below it, or a ``- item`` list): those lines are one ``***``;
- percent-encoded text (``?q=sk%2D...``, ``token%3D...``): a word holding ``%XX`` is decoded (up
  to three times: ``%252D``) and masked whole when its decoded form holds a secret.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import unquote

__all__ = ["mask_encoded", "mask_listed"]

#: A quoted flag then, after a ``,``, a quoted element (Python's repr or JSON of an argv list).
_LISTED = re.compile(
    r"""(?P<head>(?P<q>["'])(?P<flag>--?[A-Za-z][\w-]*)(?P=q)[ \t]*,[ \t]*(?P<q2>["']))"""
    r"""(?P<value>(?:\\.|(?!(?P=q2))[^\\\n])*)(?P<tail>(?P=q2))"""
)
#: ``Pwd=VALUE`` that starts a string or follows a ``;`` (ODBC), up to the next ``;``.
_PWD = re.compile(
    r"(?P<head>(?:(?<=;)|(?<![^\s\"'])|^)[ \t]*(?i:pwd)[ \t]*=[ \t]*)"
    r"(?P<value>\{[^}\n]*\}?|[^;\s\"'][^;\n]*)(?P<end>;|[ \t]*$)?",
    re.M,
)
#: The keys that make a line a connection string.
_CONNECTION_KEYS = re.compile(
    r"(?i)(?<![\w-])(?:server|uid|user[ ]id|database|driver|data[ ]source|dsn)[ \t]*="
)
_PATH = re.compile(r"[/~.$]|[A-Za-z]:\\")


def mask_listed(text: str, mask: str, is_secret: Callable[[str], bool]) -> str:
    """``text`` with the secrets of the module doc replaced by ``mask``; ``is_secret`` tells a
    secret-looking flag."""

    def listed(match: re.Match[str]) -> str:
        if not is_secret(match.group("flag")):
            return match.group(0)
        return f"{match.group('head')}{mask}{match.group('tail')}"

    text = _LISTED.sub(listed, text)
    if "</" in text:  # a plain search first, as below
        text = _XML.sub(lambda m: _element(m, mask, is_secret), text)
    if _EMPTY_VALUE.search(text) is not None:
        text = _next_lines(text, mask, is_secret)
    if "pwd" not in text.lower():  # a plain search first: the pattern is slow to try everywhere
        return text
    return _PWD.sub(lambda m: _pwd(m, mask), text)


def _pwd(match: re.Match[str], mask: str) -> str:
    text, start = match.string, match.start()
    line = text[text.rfind("\n", 0, start) + 1 : _line_end(text, match.end())]
    connection = _CONNECTION_KEYS.search(line) is not None
    in_list = match.group("end") == ";" or text[max(0, start - 1) : start] == ";"
    value, head, end = match.group("value"), match.group("head"), match.group("end") or ""
    if not connection and _PATH.match(value):
        return match.group(0)
    if not connection and not in_list:  # its first word, glued to ``=`` or alone after it
        first = value.split()[0]
        if value.strip() != first and re.search(r"\s=|=\s", head) is not None:
            return match.group(0)
        return f"{head}{mask}{value[len(first) :]}{end}"
    return f"{head}{mask}{end}"


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


#: An XML element and its text (a CDATA section, or text without markup), its end tag the same.
_XML = re.compile(
    r"(?P<head><(?P<tag>[^\W\d][\w:.-]*)(?:\s[^<>]*)?>)"
    r"(?P<value><!\[CDATA\[.{0,4096}?\]\]>|[^<]+)(?P<tail></(?P=tag)\s*>)",
    re.S,
)


def _element(match: re.Match[str], mask: str, is_secret: Callable[[str], bool]) -> str:
    if not is_secret(match.group("tag").rpartition(":")[2]):
        return match.group(0)
    return f"{match.group('head')}{mask}{match.group('tail')}"


#: A key with nothing after its colon but a comment, an anchor or a tag (its value below it).
_KEY_ALONE = re.compile(
    r"""(?P<indent>[ \t]*)(?P<item>-[ \t]+)?(?P<key>["']?[^\W\d_][\w.-]*["']?)[^\S\n]*:"""
    r"""[^\S\n]*(?:[&!][^\s#]*[^\S\n]*)?(?:\#[^\n]*)?\r?"""
)
_EMPTY_VALUE = re.compile(r"(?m):[^\S\n]*(?:[&!][^\s#]*[^\S\n]*)?(?:#[^\n]*)?\r?$\n")


def _next_lines(text: str, mask: str, is_secret: Callable[[str], bool]) -> str:
    """Each secret key's value written on the lines below it (more indented than the key, or a
    ``- item`` at the key's own indent) replaced by one line ``***`` at their indent."""
    lines = text.split("\n")
    out: list[str] = []
    at = 0
    while at < len(lines):
        line = lines[at]
        out.append(line)
        at += 1
        key = _KEY_ALONE.fullmatch(line)
        if key is None or not is_secret(key.group("key")):
            continue
        end = _value_end(lines, at, key)
        if end > at:
            first = next(line for line in lines[at:end] if line.strip())
            out.append(first[: len(first) - len(first.lstrip())] + mask)
            at = end
    return "\n".join(out)


def _value_end(lines: list[str], at: int, key: re.Match[str]) -> int:
    """Where the value below ``key`` (its lines from ``at``) ends; blank lines at its end are
    not part of it."""
    column, indent = key.start("key"), len(key.group("indent"))
    end = at
    for pos in range(at, len(lines)):
        line = lines[pos]
        depth = len(line) - len(line.lstrip())
        if not line.strip():
            continue
        listed = key.group("item") is None and depth == indent and line.lstrip().startswith("-")
        if depth <= column and not listed:
            break
        end = pos + 1
    return end


#: A word holding a percent-encoded byte (a URL's query value, a path segment).
_ENCODED = re.compile(r"(?<![^\s?&#=/\"'<>])[^\s?&#=/\"'<>]*%[0-9A-Fa-f]{2}[^\s?&#=/\"'<>]*")
#: How many times a word is decoded (``%252D`` is ``%2D`` once decoded, ``-`` twice).
_DECODINGS = 3


def mask_encoded(text: str, mask: str, finds: Callable[[str], bool]) -> str:
    """``text`` with every word holding ``%XX`` replaced by ``mask`` when its decoded form holds
    what ``finds`` reads as a secret (see the module doc)."""
    if "%" not in text:
        return text
    known: dict[str, str] = {}

    def word(match: re.Match[str]) -> str:
        if match.group(0) not in known:
            known[match.group(0)] = _decoded_word(match.group(0), mask, finds)
        return known[match.group(0)]

    return _ENCODED.sub(word, text)


#: What a decoded word holds for it to be searched: a separator or a token's length.
_WORTH = re.compile(r"[-_=:@.+/ ]|[^%\s]{16}")


def _decoded_word(encoded: str, mask: str, finds: Callable[[str], bool]) -> str:
    decoded, seen = encoded, ""
    for _ in range(_DECODINGS):
        if decoded == seen:
            break
        seen, decoded = decoded, unquote(decoded)
        if decoded != seen and _WORTH.search(decoded) and finds(decoded):
            return mask
    return encoded
