"""Secrets written as a name and a value side by side (part of the one redaction policy,
:mod:`servelab.core.redaction`, which calls :func:`mask_pairs`):

- a Kubernetes-style env list: ``- name: DB_PASSWORD`` then ``  value: X`` on a line below it
  (the same item: the ``value`` key at the ``name`` key's column), pretty-printed JSON
  (``"name": "API_KEY",`` then ``"value": "X"``) too, and the value above its name in the same
  item (``- value: X`` then ``  name: DB_PASSWORD``);
- a one-line object with a ``name``/``key``/``header`` field and a ``value`` field, in either
  order: the flow form ``env: [{name: API_KEY, value: X}]`` and JSON
  ``{"key":"password","value":"X"}``, ``{"Name":"API_KEY","Value":"X"}``;
- a pair in a list of pairs as JSON or Python prints headers: ``[["Authorization","X"]]``,
  ``[('X-Client-Cert', 'X')]``, and as bytes (an ASGI scope's, h11's raw headers):
  ``[(b"x-api-key", b"X")]``.

The value is masked, its quotes kept; a pair whose name is not secret-looking
(``- name: PORT`` / ``value: "8080"``) stays.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["mask_pairs"]

#: A line naming the pair: ``- name: X``, ``"name": "X",``, ``key: X`` (its value below it).
_NAME_LINE = re.compile(
    r"""(?mi)^(?P<indent>[ \t]*(?:-[ \t]+)?)["']?(?:name|key|header)["']?[^\S\n]*:[^\S\n]*"""
    r"""(?:"(?P<n1>[^"\n]*)"|'(?P<n2>[^'\n]*)'|(?P<n3>[^\s,#"'](?:[^\n,#]*[^\s,#])?))"""
    r"""[^\S\n]*+,?[^\S\n]*+(?:\#[^\n]*)?\r?$"""
)
#: The ``value`` line of the same item.
_VALUE_LINE = re.compile(
    r"""(?i)(?P<head>["']?value["']?[^\S\n]*:[^\S\n]*)"""
    r"""(?P<value>"(?:[^"\\\n]|\\.)*"|'(?:[^'\n]|'')*'|[^\s"'#](?:[^\n]*[^\s,])?)"""
    r"""(?P<tail>[^\S\n]*+,?[^\S\n]*+\r?)$"""
)
#: A key at the start of a line (another pair's ``name`` ends the search).
_OTHER_NAME = re.compile(r"""(?i)["']?(?:name|key|header)["']?[^\S\n]*:""")
#: How many lines below its name a pair's value is looked for (a bound on hostile text).
_REACH = 8
#: A one-line object (no object inside it), up to a bound.
_OBJECT = re.compile(r"\{[^{}\n]{1,2000}\}")
#: One field of an object: a key, then a quoted value or one up to the next ``,`` or ``}``. The
#: possessive ``*+`` here and in the lines' tails: one try per word or run of blanks, not one
#: per way to split it (a line of 40,000 blanks then ``,,`` took 22 s).
_FIELD = re.compile(
    r"""(?P<key>(?<![\w"'])["']?[A-Za-z_]\w*+["']?)[^\S\n]*:[^\S\n]*"""
    r"""(?P<value>"(?:[^"\\\n]|\\.)*"|'(?:[^'\n]|'')*'|[^,}\s](?:[^,}]*[^,}\s])?)(?=[^\S\n]*[,}])"""
)
_NAME_FIELDS = frozenset({"name", "key", "header"})
#: A two-element list or tuple of quoted strings: ``["Authorization", "X"]``.
_PAIR = re.compile(
    r"""(?P<head>[\[(][ \t]*b?(?P<q>["'])(?P<name>[^"'\\\n]{1,200})(?P=q)"""
    r"""[ \t]*,[ \t]*b?(?P<q2>["']))"""
    r"""(?P<value>(?:\\.|(?!(?P=q2))[^\\\n])*)(?P<tail>(?P=q2)[ \t]*[\])])"""
)


def mask_pairs(
    text: str,
    mask: str,
    is_secret: Callable[[str], bool],
) -> str:
    """``text`` with the value of every pair of the module doc whose name ``is_secret`` replaced
    by ``mask``."""
    if "," in text and ("[" in text or "(" in text):
        text = _PAIR.sub(lambda m: _pair(m, mask, is_secret), text)
    if "value" not in text.lower():  # a plain search first: the rest needs a value field
        return text
    if "{" in text:
        text = _OBJECT.sub(lambda m: _object(m.group(0), mask, is_secret), text)
    return _below(text, mask, is_secret)


def _pair(match: re.Match[str], mask: str, is_secret: Callable[[str], bool]) -> str:
    if not match.group("value") or not is_secret(match.group("name")):
        return match.group(0)
    return f"{match.group('head')}{mask}{match.group('tail')}"


def _unquoted(value: str) -> str:
    return value[1:-1] if len(value) > 1 and value[0] in "\"'" and value[-1] == value[0] else value


def _masked(value: str, mask: str) -> str:
    """``value`` replaced by ``mask``, its quotes kept; an empty value stays."""
    if not _unquoted(value).strip():
        return value
    return f"{value[0]}{mask}{value[0]}" if value[0] in "\"'" else mask


def _object(body: str, mask: str, is_secret: Callable[[str], bool]) -> str:
    fields = list(_FIELD.finditer(body))
    named = any(
        _unquoted(f["key"]).lower() in _NAME_FIELDS and is_secret(_unquoted(f["value"]).strip())
        for f in fields
    )
    if not named:
        return body
    out, pos = [], 0
    for field in fields:
        if _unquoted(field["key"]).lower() == "value":
            out += [body[pos : field.start("value")], _masked(field["value"], mask)]
            pos = field.end("value")
    return "".join([*out, body[pos:]])


def _below(text: str, mask: str, is_secret: Callable[[str], bool]) -> str:
    """Each value line below a secret name line (the same item) masked."""
    lines: list[str] | None = None
    row, counted = 0, 0  # the line of ``counted`` (lines are counted once, as the search goes)
    for match in _NAME_LINE.finditer(text):
        name = match["n1"] if match["n1"] is not None else match["n2"] or match["n3"] or ""
        if not is_secret(name.strip()):
            continue
        if lines is None:
            lines = text.split("\n")
        row, counted = row + text.count("\n", counted, match.start()), match.start()
        column = len(match["indent"])
        _mask_value_below(lines, row, column, mask)
        if not match["indent"].strip():  # not an item's first line: its value may be above
            _mask_value_above(lines, row, column, mask)
    return text if lines is None else "\n".join(lines)


def _mask_value(lines: list[str], at: int, column: int, mask: str) -> bool:
    """The value of line ``at``'s ``value`` key at ``column`` masked; whether it was one."""
    found = _VALUE_LINE.match(lines[at], column)
    if found is None:
        return False
    line, value = lines[at], _masked(found["value"], mask)
    lines[at] = line[: found.start("value")] + value + line[found.end("value") :]
    return True


#: A line's indent, a ``- `` item's dash included (its key's column).
_ITEM_INDENT = re.compile(r"[ \t]*(?:-[ \t]+)?")


def _mask_value_above(lines: list[str], row: int, column: int, mask: str) -> None:
    """A ``value`` line above the name (``- value: X`` then ``  name: DB_PASSWORD``), in the same
    item: up to the item's ``- `` line or a line less indented."""
    for at in range(row - 1, max(-1, row - 1 - _REACH), -1):
        line = lines[at]
        if not line.strip():
            continue
        indent = _ITEM_INDENT.match(line)
        key_column = 0 if indent is None else indent.end()
        item = line.lstrip().startswith("-")
        if key_column < column or (item and key_column != column):
            return
        if key_column == column and (_mask_value(lines, at, column, mask) or item):
            return
        if key_column == column and _OTHER_NAME.match(line, column):
            return


def _mask_value_below(lines: list[str], row: int, column: int, mask: str) -> None:
    for at in range(row + 1, min(len(lines), row + 1 + _REACH)):
        line = lines[at]
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if depth < column:
            return
        if depth > column:
            continue
        if _mask_value(lines, at, depth, mask) or _OTHER_NAME.match(line, depth):
            return
