"""Secrets in listed and connection-string forms (part of the one redaction policy,
:mod:`servelab.core.redaction`, which calls :func:`mask_listed`):

- an argument list as Python or JSON prints it (``CalledProcessError``'s
  ``Command '['python', '-m', 'x', '--api-key', 'SECRET']'``, ``["--password", "x"]``): the
  quoted element after a quoted secret-looking flag is masked, its quotes kept;
  ``['--port', '30000']`` stays;
- ODBC's ``Pwd=``/``PWD=`` in a ``;``-separated connection string
  (``Server=db;Uid=sa;Pwd=SECRET;``, ``PWD=SECRET;``, a ``{braced}`` value too): ``PWD`` alone
  is the shell's working directory, an ordinary name, so it is masked only there, and a path
  (``PWD=/home/user;``) outside a string with a ``Server``/``Uid``/``Database``/``Driver`` key
  stays.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["mask_listed"]

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
    if "pwd" not in text.lower():  # a plain search first: the pattern is slow to try everywhere
        return text
    return _PWD.sub(lambda m: _pwd(m, mask), text)


def _pwd(match: re.Match[str], mask: str) -> str:
    text, start = match.string, match.start()
    line = text[text.rfind("\n", 0, start) + 1 : _line_end(text, match.end())]
    connection = _CONNECTION_KEYS.search(line) is not None
    in_list = match.group("end") == ";" or text[max(0, start - 1) : start] == ";"
    if not connection and (not in_list or _PATH.match(match.group("value"))):
        return match.group(0)
    end = match.group("end") or ""
    return f"{match.group('head')}{mask}{end}"


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end
