"""Env files in systemd ``EnvironmentFile=`` syntax: parse, edit, render, diff, redact.

Pure: text in, data out. The syntax accepted is the one systemd reads (``man systemd.exec``):

- blank lines and lines whose first non-blank character is ``#`` or ``;`` are comments;
- ``NAME=VALUE`` with ``NAME`` made of letters, digits and ``_`` (not starting with a digit);
  blanks around the ``=`` and around the line are ignored;
- a value may be wholly single-quoted (literal) or double-quoted (``\\"``, ``\\\\``, ``\\$`` and
  ``\\``` escapes), keeping every blank inside its quotes; an unquoted value keeps inner blanks,
  loses trailing ones, and a backslash escapes the next character;
- a line ending in a backslash continues on the next line.

``export NAME=VALUE`` is shell syntax that systemd does **not** accept in an EnvironmentFile (it
would make the unit fail to start): it is rejected with a :class:`~servelab.errors.KnobError` naming
the line, so a file servelab accepts is one systemd accepts.

Editing keeps every other line byte for byte (comments, order, blank lines): :meth:`EnvFile.set`
rewrites only the assignment it changes, and appends a new one at the end. A byte that is not
UTF-8 (a Latin-1 ``\\xe9``) is read as Python's ``surrogateescape`` keeps it: the line's text holds
it, so :meth:`EnvFile.encode` writes it back unchanged; the value read shows it as U+FFFD.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from servelab.core.redaction import REDACTED
from servelab.core.secretnames import is_secret_name
from servelab.errors import KnobError

__all__ = [
    "BOM",
    "EnvChange",
    "EnvFile",
    "EnvLine",
    "diff",
    "parse_envfile",
    "parse_environ",
    "redact",
    "render_value",
    "select",
]

#: The byte order mark a UTF-8 file may begin with (an editor's, on Windows), as text.
BOM = "\ufeff"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_BARE = re.compile(r"[A-Za-z0-9_./:,@%+=-]*\Z")


@dataclass(frozen=True)
class EnvLine:
    """One logical line: its original text, and the assignment it holds (if any)."""

    text: str
    name: str | None = None
    value: str | None = None


@dataclass(frozen=True)
class EnvChange:
    """A difference between two env files: ``old``/``new`` are None when the name is absent."""

    name: str
    old: str | None
    new: str | None

    @property
    def kind(self) -> str:
        if self.old is None:
            return "added"
        return "removed" if self.new is None else "changed"


@dataclass(frozen=True)
class EnvFile:
    """A parsed env file. Immutable: :meth:`set` and :meth:`unset` return a new one."""

    lines: tuple[EnvLine, ...] = ()
    source: str = "<env>"
    trailing_newline: bool = field(default=True)
    #: the file began with a UTF-8 byte order mark: read past, and written back
    bom: bool = False

    def get(self, name: str) -> str | None:
        """The value systemd would use (the last assignment wins), or None."""
        return self.as_dict().get(name)

    def exact(self, name: str) -> str | None:
        """:meth:`get`, with each byte that was not UTF-8 kept (as a lone surrogate), for a
        value rewritten in part (the words of an ``args_env`` variable)."""
        last = _last_index(self.lines, name)
        if last is None:
            return None
        return _unquote(self.lines[last].text.strip().partition("=")[2], self.source)

    def __contains__(self, name: object) -> bool:
        return name in self.as_dict()

    @property
    def names(self) -> list[str]:
        return list(self.as_dict())

    def as_dict(self) -> dict[str, str]:
        result: dict[str, str] = {}
        for line in self.lines:
            if line.name is not None and line.value is not None:
                result[line.name] = line.value
        return result

    def set(self, name: str, value: str) -> EnvFile:
        """Set ``name``: rewrite its last assignment in place (dropping earlier ones), or append;
        with the file's own line ends (a CRLF file's new line ends in CRLF: :meth:`_cr`)."""
        _check_name(name, self.source)
        text = f"{name}={render_value(value)}"
        last = _last_index(self.lines, name)
        if last is None:
            lines, cr = list(self.lines), self._cr()
            if lines and cr and not lines[-1].text.endswith(cr):  # no longer the last line
                lines[-1] = replace(lines[-1], text=lines[-1].text + cr)
            ending = cr if self.trailing_newline or not lines else ""
            return replace(self, lines=(*lines, EnvLine(text + ending, name, value)))
        cr = "\r" if self.lines[last].text.endswith("\r") else ""
        new_line = EnvLine(text + cr, name, value)
        kept = [
            new_line if i == last else line
            for i, line in enumerate(self.lines)
            if line.name != name or i == last
        ]
        return replace(self, lines=tuple(kept))

    def unset(self, name: str) -> EnvFile:
        """Remove every assignment of ``name`` (comments stay); a file without a last line end
        still ends without one (no lone CR of a CRLF line left at its end)."""
        lines = [line for line in self.lines if line.name != name]
        if lines and not self.trailing_newline and self.lines[-1].name == name:
            lines[-1] = replace(lines[-1], text=lines[-1].text.removesuffix("\r"))
        return replace(self, lines=tuple(lines))

    def _cr(self) -> str:
        """``\r`` when the file's lines end in CRLF (each line's text keeps the CR it was read
        with, the join adds the LF), else empty."""
        return "\r" if any(line.text.endswith("\r") for line in self.lines) else ""

    def render(self) -> str:
        """The file's text (a byte that was not UTF-8 is in it as a lone surrogate)."""
        text = "\n".join(line.text for line in self.lines)
        text = text + "\n" if self.lines and self.trailing_newline else text
        return BOM + text if self.bom else text

    def encode(self) -> bytes:
        """The file's bytes: every line not edited as it was read, byte for byte."""
        return self.render().encode("utf-8", "surrogateescape")


def _last_index(lines: tuple[EnvLine, ...], name: str) -> int | None:
    found = None
    for i, line in enumerate(lines):
        if line.name == name:
            found = i
    return found


def _check_name(name: str, source: str) -> None:
    if not _NAME.match(name):
        raise KnobError(f"{source}: {name!r} is not a valid environment variable name")


def render_value(value: str) -> str:
    """A value written so systemd reads it back unchanged (bare when safe, else double-quoted)."""
    if "\n" in value or "\0" in value:
        raise KnobError("an env file value cannot contain a newline or NUL")
    if _BARE.match(value):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return '"' + escaped.replace("`", "\\`") + '"'


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join backslash-continued lines; each item is (first physical line number, raw text)."""
    result: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 1
    for number, physical in enumerate(text.split("\n"), start=1):
        if not pending:
            start = number
        pending.append(physical)
        stripped = physical.lstrip()
        is_comment = len(pending) == 1 and stripped[:1] in ("#", ";")
        if physical.endswith("\\") and not physical.endswith("\\\\") and not is_comment:
            continue
        result.append((start, "\n".join(pending)))
        pending = []
    if pending:
        result.append((start, "\n".join(pending)))
    return result


def _unquote(raw: str, where: str) -> str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        return raw[1:-1]
    if raw[:1] == '"':
        if len(raw) < 2 or raw[-1] != '"' or (raw.endswith('\\"') and not raw.endswith('\\\\"')):
            raise KnobError(f"{where}: unterminated double quote")
        return _unescape(raw[1:-1], where, quoted=True)
    if raw[:1] == "'":
        raise KnobError(f"{where}: unterminated single quote")
    return _unescape(raw, where)


def _unescape(body: str, where: str, *, quoted: bool = False) -> str:
    """``body`` with its escapes read; blanks at its end dropped unless it was double-quoted
    (systemd keeps them there: ``K="x "`` is ``x `` with its space)."""
    out: list[str] = []
    i = 0
    while i < len(body):
        char = body[i]
        if char == "\\":
            if i + 1 >= len(body):
                raise KnobError(f"{where}: trailing backslash")
            nxt = body[i + 1]
            if nxt != "\n":  # an escaped newline is a line continuation: dropped
                out.append(nxt)
            i += 2
            continue
        out.append(char)
        i += 1
    value = "".join(out)
    return value if quoted else value.rstrip(" \t")


def _parse_line(number: int, raw: str, source: str) -> EnvLine:
    stripped = raw.strip()
    if not stripped or stripped[0] in "#;":
        return EnvLine(raw)
    where = f"{source}:{number}"
    if "=" not in stripped:
        raise KnobError(f"{where}: expected NAME=VALUE, got {stripped[:60]!r}")
    name, _, value = stripped.partition("=")
    name = name.strip()
    if name.startswith("export ") or name.startswith("export\t"):
        raise KnobError(f"{where}: 'export' is shell syntax; systemd EnvironmentFile rejects it")
    if not _NAME.match(name):
        raise KnobError(f"{where}: {name!r} is not a valid environment variable name")
    return EnvLine(raw, name, _readable(_unquote(value, where)))


#: A byte that was not UTF-8, as ``surrogateescape`` reads it (U+DC80-U+DCFF).
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def _readable(value: str) -> str:
    """``value`` with each byte that was not UTF-8 shown as U+FFFD (its line keeps the byte)."""
    return _ESCAPED_BYTE.sub("\ufffd", value)


def parse_envfile(text: str, *, source: str = "<env>") -> EnvFile:
    """Parse systemd EnvironmentFile text. Raises :class:`KnobError` naming ``source:line``.

    A leading UTF-8 byte order mark is read past and kept (:attr:`EnvFile.bom`)."""
    bom = text.startswith(BOM)
    text = text[len(BOM) :] if bom else text
    trailing = text.endswith("\n") or not text
    body = text[:-1] if text.endswith("\n") else text
    if not body and trailing:
        return EnvFile((), source, True, bom)
    lines = tuple(_parse_line(n, raw, source) for n, raw in _logical_lines(body))
    return EnvFile(lines, source, trailing, bom)


def parse_environ(raw: bytes) -> dict[str, str]:
    """Parse ``/proc/PID/environ`` (NUL-separated ``NAME=VALUE``); undecodable bytes replaced."""
    result: dict[str, str] = {}
    for item in raw.split(b"\0"):
        if not item or b"=" not in item:
            continue
        name, _, value = item.partition(b"=")
        result[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return result


def select(mapping: Mapping[str, str], names: Iterable[str]) -> dict[str, str]:
    """Only the named keys that are present: undeclared values never leave the caller."""
    return {name: mapping[name] for name in names if name in mapping}


def diff(old: EnvFile | Mapping[str, str], new: EnvFile | Mapping[str, str]) -> list[EnvChange]:
    """Names added, removed or changed from ``old`` to ``new`` (sorted by name)."""
    before = old.as_dict() if isinstance(old, EnvFile) else dict(old)
    after = new.as_dict() if isinstance(new, EnvFile) else dict(new)
    changes = []
    for name in sorted(set(before) | set(after)):
        if before.get(name) != after.get(name):
            changes.append(EnvChange(name, before.get(name), after.get(name)))
    return changes


def redact(mapping: Mapping[str, str], *, reveal: Iterable[str] = ()) -> dict[str, str]:
    """Values of secret-looking names (TOKEN, SECRET, PASSWORD, API_KEY, ...: the one policy,
    :func:`servelab.core.secretnames.is_secret_name`) replaced by ``***``.

    Names in ``reveal`` (e.g. a service's declared knobs) are always shown as they are.
    """
    shown = set(reveal)
    return {
        name: value if name in shown or not is_secret_name(name) else REDACTED
        for name, value in mapping.items()
    }
