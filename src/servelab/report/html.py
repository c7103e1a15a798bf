"""The static, self-contained HTML index of the generated docs (one string, no I/O).

Inline CSS, plots embedded as ``data:`` URIs, no script and no external resource, so the file
renders the same from a file:// URL, an artifact store or an e-mail. It links the perf plan and
each case's markdown page, which sit next to it.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

__all__ = ["CaseRow", "KnobRow", "render_index"]

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; padding: 0 1.5rem;
       max-width: 70rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; }
th, td { border: 1px solid #ccc; padding: .3rem .6rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
code { background: #f6f6f6; padding: 0 .2rem; }
.ok { color: #176a1d; } .bad { color: #a11; }
img { max-width: 100%; border: 1px solid #ddd; margin: .5rem 0; }
"""


@dataclass(frozen=True)
class KnobRow:
    service: str
    knob: str
    live: str
    file: str
    verdicts: str
    plots: list[str] = field(default_factory=list)
    #: ``(caption, rows)``; the first row is the header.
    tables: list[tuple[str, list[list[str]]]] = field(default_factory=list)


@dataclass(frozen=True)
class CaseRow:
    id: int
    title: str
    status: str
    restore_status: str
    root_cause: str | None
    page: str
    restore_plan: list[str] = field(default_factory=list)


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _knob_table(knobs: Sequence[KnobRow]) -> list[str]:
    if not knobs:
        return ["<p>No knob has an A/B experiment or a recorded change yet.</p>"]
    out = [
        '<table id="knobs">',
        "<tr><th>service</th><th>knob</th><th>live value</th><th>env file</th>"
        "<th>latest A/B verdicts</th></tr>",
    ]
    for k in knobs:
        out.append(
            f"<tr><td>{escape(k.service)}</td><td><code>{escape(k.knob)}</code></td>"
            f"<td>{escape(k.live)}</td><td>{escape(k.file)}</td><td>{escape(k.verdicts)}</td></tr>"
        )
    return [*out, "</table>"]


def _case_table(cases: Sequence[CaseRow]) -> list[str]:
    if not cases:
        return ["<p>No case recorded.</p>"]
    out = [
        '<table id="cases">',
        "<tr><th>case</th><th>title</th><th>status</th><th>root cause</th><th>restore</th></tr>",
    ]
    for c in cases:
        css = "ok" if c.restore_status == "restored and verified" else ""
        out.append(
            f'<tr><td><a href="{escape(c.page)}">#{c.id}</a></td><td>{escape(c.title)}</td>'
            f"<td>{escape(c.status)}</td><td>{escape(c.root_cause or '')}</td>"
            f'<td class="{css}">{escape(c.restore_status)}</td></tr>'
        )
    return [*out, "</table>"]


def _ab_tables(knobs: Sequence[KnobRow]) -> list[str]:
    out = []
    for k in knobs:
        for caption, rows in k.tables:
            if not rows:
                continue
            head, *body = rows
            out.append(f'<table class="ab"><caption>{escape(caption)}</caption>')
            out.append("<tr>" + "".join(f"<th>{escape(c)}</th>" for c in head) + "</tr>")
            out += ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in body]
            out.append("</table>")
    return out


def _plans(cases: Sequence[CaseRow]) -> list[str]:
    out = []
    for c in cases:
        if c.restore_plan:
            out.append(f"<h3>Restore plan of case {c.id}: {escape(c.title)}</h3><ul>")
            out += [f"<li>{escape(line)}</li>" for line in c.restore_plan]
            out.append("</ul>")
    return out


def _plot_section(knobs: Sequence[KnobRow], plots: Mapping[str, bytes]) -> list[str]:
    out = []
    for k in knobs:
        for path in k.plots:
            if path in plots:
                alt = f"{k.service} {k.knob} ({path})"
                out.append(f'<figure><img alt="{escape(alt)}" src="{_data_uri(plots[path])}">'
                           f"<figcaption>{escape(alt)}</figcaption></figure>")  # fmt: skip
    return out


def render_index(
    knobs: Sequence[KnobRow],
    cases: Sequence[CaseRow],
    plots: Mapping[str, bytes],
    perf_plan: str,
) -> str:
    """The index page: knobs (live value, verdicts), cases (status, restore), plans, plots."""
    body = [
        "<h1>servelab report</h1>",
        f'<p>Generated from the ledger. Perf plan: <a href="{escape(perf_plan)}">'
        f"{escape(perf_plan)}</a>.</p>",
        "<h2>Knobs</h2>",
        *_knob_table(knobs),
        *_ab_tables(knobs),
        "<h2>Cases</h2>",
        *_case_table(cases),
        *_plans(cases),
        "<h2>Plots</h2>",
        *(_plot_section(knobs, plots) or ["<p>No A/B experiment recorded.</p>"]),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>servelab report</title>"
        f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
