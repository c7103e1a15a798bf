"""The few text helpers every renderer shares: rich renderables to plain text, how an unset
value reads, Markdown's escapes. Pure: returns str, no I/O. (A ``--json`` document's text is
:mod:`servelab.report.jsontext`.)"""

from __future__ import annotations

import bisect
import io
import json
import re
from collections.abc import Iterator
from typing import Any

from rich.console import Console, RenderableType

from servelab.core.knobs.invisible import escape_invisible
from servelab.core.redaction import stored_url

__all__ = [
    "AUTHORIZED_TWICE",
    "arm_value",
    "code_spans",
    "csv_text_cell",
    "level_label",
    "md_code",
    "md_text",
    "pct",
    "plain_text",
    "safe_markdown",
    "show_value",
    "url_text",
]

#: Why ``--url`` with credentials and ``--header Authorization:…`` together are refused.
AUTHORIZED_TWICE = (
    "--url carries credentials (user:***@) and --header gives an Authorization header too: a "
    "request carries one Authorization; give the credentials one way"
)


def plain_text(*renderables: RenderableType, width: int = 120) -> str:
    """Render tables and text to plain text (no colour, no highlighting); strings soft-wrap."""
    buffer = io.StringIO()
    # markup=False: cells hold untrusted text (readiness bodies, log lines, errors) printed as is.
    console = Console(file=buffer, width=width, color_system=None, highlight=False, markup=False)
    for renderable in renderables:
        console.print(renderable, soft_wrap=isinstance(renderable, str))
    return buffer.getvalue()


def url_text(url: str) -> str:
    """A URL as every human line shows it (a title, a table's cell, a sentence): the one
    redaction policy's (:func:`~servelab.core.redaction.stored_url`, what ``--json`` and the
    ledger hold of it), its password and its secret-named query parameters masked. Every URL a
    renderer prints goes through here (``tests/report/test_url_text.py`` reads report/ for one
    that does not)."""
    return stored_url(url)


def pct(fraction: float) -> str:
    """``-0.113`` → ``−11.3%`` (a real minus sign), ``0.05`` → ``+5.0%``."""
    return f"{fraction * 100:+.1f}%".replace("-", "−")


def show_value(value: str | None) -> str:
    """A knob value as the reports show it: ``(unset)`` for None; quoted (as JSON quotes it)
    when it starts or ends with a blank, which a bare ``x `` would hide; quoted with each
    invisible character escaped (``"\\u200b384"``) when it holds one (a zero-width space, a bidi
    control...), which would hide it too."""
    if value is None:
        return "(unset)"
    if escape_invisible(value) != value:
        return '"' + escape_invisible(value.replace("\\", "\\\\").replace('"', '\\"')) + '"'
    return json.dumps(value, ensure_ascii=False) if value != value.strip() else value


def arm_value(value: str | None) -> str:
    """An arm's knob value as the progress and reports say it: :func:`show_value`, and
    ``the engine default`` for an unset knob (never ``None``)."""
    return "the engine default" if value is None else show_value(value)


def level_label(concurrency: int) -> str:
    """A bench level as the reports name it: ``C64``, or ``trace`` for a trace replay (its one
    level, numbered 0: it has no concurrency)."""
    return "trace" if concurrency == 0 else f"C{concurrency}"


#: A line ending as CommonMark reads one: user text put into a page never breaks its line.
_LINE_END = re.compile(r"\r\n|\r|\n")
#: What user text escapes with a backslash: code spans, emphasis, link brackets, table pipes.
_MD_ESCAPES = str.maketrans({c: "\\" + c for c in "\\`*[]|~"})
#: ``_`` where it could open or close emphasis (not inside a word), a GFM bare URL's ``://``.
_MD_SPECIAL = re.compile(r"(?<![^\W_])_|_(?![^\W_])|:(?=//)")


def md_text(text: str) -> str:
    """User text (a case title, a note, a reason, a label) as markdown that shows it as written
    and is nothing else: no code span, emphasis, link, image, table cell or raw HTML opens or
    closes in it (``<`` and ``&`` become entities, the rest a backslash escape) and its line
    endings become blanks, so it stays on the line it was put on."""
    one = _LINE_END.sub(" ", text).replace("&", "&amp;").replace("<", "&lt;")
    return _MD_SPECIAL.sub(r"\\\g<0>", one.translate(_MD_ESCAPES))


def md_code(text: str, *, cell: bool = False) -> str:
    """User text (a knob value, a knob's name, a target) as one code span that holds exactly it:
    a backtick fence longer than any run of backticks inside, padded with a blank where
    CommonMark would strip one; line endings become blanks; ``cell``: inside a pipe table, where
    a ``|`` is written ``\\|``. The empty text shows as ``""`` in code."""
    body = _LINE_END.sub(" ", text)
    if cell:
        body = body.replace("|", "\\|")
    if not body:
        return '`""`'
    fence = "`" * (max((len(run) for run in re.findall("`+", body)), default=0) + 1)
    stripped = len(body) > 1 and body[0] == body[-1] == " " and body.strip(" ") != ""
    pad = " " if "`" in (body[0], body[-1]) or stripped else ""
    return f"{fence}{pad}{body}{pad}{fence}"


#: Text up to the next string of backticks no backslash escapes (the escapes read past).
_TO_RUN = re.compile(r"(?:[^`\\]+|\\.)*+(`+)", re.S)
_RUN = re.compile("`+")


def code_spans(text: str) -> Iterator[tuple[int, int, str]]:
    """Each code span of one line (or one table cell) as CommonMark pairs them: ``(start, end,
    content)``. A backtick string not escaped by a backslash opens one, and only the next
    backtick string of the same length closes it (a lone backtick is text; backslashes escape
    nothing inside); the content loses one blank at each end when it has one at both and is not
    all blanks. Each closer is looked up, never searched for: linear in the text however its
    backticks are laid out."""
    runs: dict[int, list[int]] = {}
    for run in _RUN.finditer(text):
        runs.setdefault(run.end() - run.start(), []).append(run.start())
    pos = 0
    while (m := _TO_RUN.match(text, pos)) is not None:
        opened, pos = m.start(1), m.end(1)
        starts = runs.get(pos - opened, [])
        if (k := bisect.bisect_left(starts, pos)) == len(starts):
            continue
        content = text[pos : starts[k]]
        if len(content) > 1 and content[0] == content[-1] == " " and content.strip(" "):
            content = content[1:-1]
        pos = starts[k] + pos - opened
        yield opened, pos, content


#: A table cell's edge: a ``|`` no backslash escapes.
_CELL_EDGE = re.compile(r"(?<!\\)\|")


def _escape_outside_code(text: str) -> str:
    out, last = [], 0
    for start, end, _ in code_spans(text):
        out += [text[last:start].replace("<", "&lt;"), text[start:end]]
        last = end
    return "".join([*out, text[last:].replace("<", "&lt;")])


def safe_markdown(md: str) -> str:
    """The last guard of a markdown page (user text is already escaped where it is put, by
    :func:`md_text` and :func:`md_code`): every ``<`` outside a code span becomes ``&lt;``
    (shown as ``<``, never read as a tag). Code spans are found as CommonMark finds them, one
    line at a time and, in a pipe table's row, one cell at a time, so a lone backtick can never
    turn a later ``<script>`` into "code" that a renderer then reads as HTML."""
    out = []
    for line in md.splitlines(keepends=True):
        if line.lstrip().startswith("|"):
            cells = _CELL_EDGE.split(line)
            out.append("|".join(_escape_outside_code(cell) for cell in cells))
        else:
            out.append(_escape_outside_code(line))
    return "".join(out)


#: What a spreadsheet reads as the start of a formula (OWASP's CSV injection rule, with line feed).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")
#: A plain decimal number, signed or not: a cell a spreadsheet reads as a number, never a formula.
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def csv_text_cell(value: Any) -> Any:
    """``value`` safe to open in a spreadsheet: text that starts with ``=``, ``+``, ``-``, ``@``,
    a tab, a carriage return or a line feed gets a leading ``'`` (a spreadsheet would run it as a
    formula); numbers, and text that is a plain number (``-1.5``), stay as they are."""
    formula = isinstance(value, str) and value.startswith(_FORMULA_START)
    return "'" + value if formula and _PLAIN_NUMBER.fullmatch(value) is None else value
