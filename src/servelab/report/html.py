"""The static, self-contained HTML index of the generated docs (one string, no I/O).

Inline CSS, plots embedded as ``data:`` URIs, no script and no external resource, so the file
renders the same from a file:// URL, an artifact store or an e-mail. It links the perf plan, each
case, A/B experiment, bench run and soak page (HTML twins of the markdown pages next to it).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

from servelab.report.pages import PageLink, html_page

__all__ = ["CaseRow", "KnobRow", "render_index"]


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


def _links(sections: Sequence[tuple[str, Sequence[PageLink]]]) -> list[str]:
    out = []
    for title, links in sections:
        out.append(f"<h2>{escape(title)}</h2>")
        if not links:
            out.append(f"<p>No {escape(title.lower())} recorded.</p>")
            continue
        out.append("<ul>")
        out += [f'<li><a href="{escape(k.href)}">{escape(k.title)}</a> {escape(k.at)}</li>'
                for k in links]  # fmt: skip
        out.append("</ul>")
    return out


def render_index(
    knobs: Sequence[KnobRow],
    cases: Sequence[CaseRow],
    plots: Mapping[str, bytes],
    perf_plan: str,
    *,
    sections: Sequence[tuple[str, Sequence[PageLink]]] = (),
) -> str:
    """The index page: knobs (live value, verdicts), cases (status, restore), plans, plots, and
    a link to every page (A/B experiments, bench runs, soaks)."""
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
        *_links(sections),
    ]
    return html_page("servelab report", "\n".join(body))
