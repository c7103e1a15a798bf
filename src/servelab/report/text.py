"""The few text helpers every renderer shares: rich renderables to plain text, how an unset
value reads, and a ``--json`` document's text. Pure: returns str, no I/O."""

from __future__ import annotations

import io
import json
import re

from rich.console import Console, RenderableType

from servelab.core.knobs.invisible import escape_invisible
from servelab.core.ledger.codec import finite

__all__ = [
    "arm_value",
    "json_text",
    "level_label",
    "pct",
    "plain_text",
    "safe_markdown",
    "show_value",
]


def plain_text(*renderables: RenderableType, width: int = 120) -> str:
    """Render tables and text to plain text (no colour, no highlighting); strings soft-wrap."""
    buffer = io.StringIO()
    # markup=False: cells hold untrusted text (readiness bodies, log lines, errors) printed as is.
    console = Console(file=buffer, width=width, color_system=None, highlight=False, markup=False)
    for renderable in renderables:
        console.print(renderable, soft_wrap=isinstance(renderable, str))
    return buffer.getvalue()


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


#: A code span, as :mod:`servelab.report.pages` reads one (its text is literal in markdown).
_CODE_SPAN = re.compile(r"`[^`]+`")


def safe_markdown(md: str) -> str:
    """A markdown page whose user text (a case title, a knob value, a reason) cannot carry raw
    HTML: every ``<`` outside a code span becomes ``&lt;`` (shown as ``<`` by every renderer,
    never read as a tag: ``<script>`` stays text)."""
    out, last = [], 0
    for span in _CODE_SPAN.finditer(md):
        out += [md[last : span.start()].replace("<", "&lt;"), span.group(0)]
        last = span.end()
    out.append(md[last:].replace("<", "&lt;"))
    return "".join(out)


def json_text(doc: object) -> str:
    """A ``--json`` document (``doc``: JSON-ready values) as the text a command prints: strict
    JSON, indented; a number that is not finite (the std of one run, an interval without bounds)
    is ``null``, a value JSON has no form for its ``str``. Each feature's ``--json`` builder
    renders its typed contract (the codec's encoding plus words) and returns this text, so no
    JSON dict crosses from report/ to cli/."""
    return json.dumps(finite(doc), indent=2, default=str, allow_nan=False) + "\n"
