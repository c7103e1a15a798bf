"""The report's pages as HTML a browser shows: every markdown page gets a self-contained twin.

:func:`markdown_html` converts the markdown servelab itself writes (headings, paragraphs, lists,
pipe tables, code spans, bold, links, images) into one HTML page; an image whose path is in
``images`` is embedded as a ``data:`` URI, and a link to a ``.md`` page points to its ``.html``
twin. :func:`run_markdown` and :func:`soak_markdown` write the pages of a bench run and a soak from
their ledger records (pure; no I/O).
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape, unescape
from typing import Any
from urllib.parse import urlsplit

from servelab.core.bench.contract import LevelSummary
from servelab.core.bench.record import BenchRunRecord
from servelab.core.bench.stored import (
    StoredPhase,
    StoredRun,
    StoredTelemetry,
    StoredTraces,
    stored_run,
)
from servelab.core.soak.record import SoakRunRecord
from servelab.core.stats import Summary
from servelab.core.telemetry.rules import TelemetryEvidence
from servelab.core.telemetry.summary import RunTelemetry
from servelab.report.runnotes import evidence_rows, return_note
from servelab.report.slo import cache_text, slo_rows
from servelab.report.soak.soak import finding_advice, page_sections
from servelab.report.soak.words import finding_evidence, layer_title
from servelab.report.text import code_spans, level_label, md_code, md_text

__all__ = [
    "CSS",
    "SAFE_SCHEMES",
    "PageLink",
    "html_page",
    "markdown_html",
    "run_markdown",
    "run_phases",
    "soak_markdown",
]

CSS = """
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
class PageLink:
    """One page the index lists: its title, its path (relative to the index) and when."""

    title: str
    href: str
    at: str = ""


_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
#: A backslash escape: the ASCII punctuation character after it is text (CommonMark).
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_BLOCK = re.compile(r"(#|\||\s*[-*]\s)")


def html_page(title: str, body: str) -> str:
    """A whole self-contained page: inline CSS, no script, no external resource (``title``: a
    markdown heading, its ``&lt;`` a ``<``, its ``\\[`` a ``[``)."""
    title = escape(unescape(_ESCAPED.sub(r"\1", title)))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{title}</title><style>{CSS}</style></head><body>\n{body}\n</body></html>\n"
    )


#: The link schemes a page follows; any other (``javascript:``, ``data:``, ``vbscript:``) in a
#: markdown link written from user text (a case title, a note, a reason) stays text.
SAFE_SCHEMES = frozenset({"", "http", "https", "mailto"})


def _safe(target: str) -> bool:
    try:
        return urlsplit(target).scheme.lower() in SAFE_SCHEMES
    except ValueError:  # an unparsable URL (a bad IPv6 literal)
        return False


def _href(target: str) -> str:
    return target[:-3] + ".html" if target.endswith(".md") and "://" not in target else target


def _link(m: re.Match[str]) -> str:
    text, target = m.group(1), m.group(2)
    if not _safe(target):
        return m.group(0)  # shown as written, never a link
    return f'<a href="{escape(_href(target))}">{text}</a>'


def _inline(text: str, images: Mapping[str, bytes]) -> str:
    """Escape ``text``, then turn code spans, bold, images and links into HTML; a code span and
    a backslash-escaped character are set aside first (as CommonMark reads them), so neither
    becomes markup."""
    kept: list[str] = []

    def keep(html: str) -> str:
        kept.append(html)
        return f"\x00{len(kept) - 1}\x00"

    def image(m: re.Match[str]) -> str:
        alt, src = m.group(1), m.group(2)
        if src in images:
            src = "data:image/png;base64," + base64.b64encode(images[src]).decode("ascii")
        elif not _safe(src):
            return m.group(0)
        return f'<img alt="{escape(alt)}" src="{escape(src)}">'

    text, parts, last = text.replace("\x00", "\ufffd"), [], 0
    for start, end, content in code_spans(text):
        parts += [text[last:start], keep(f"<code>{escape(content)}</code>")]
        last = end
    text = "".join([*parts, text[last:]])
    text = _ESCAPED.sub(lambda m: keep(escape(m.group(1))), text)
    out = escape(unescape(text), quote=False)  # &lt; is a <, shown
    out = _IMAGE.sub(image, out)
    out = _LINK.sub(_link, out)
    out = _BOLD.sub(r"<strong>\1</strong>", out)
    return re.sub("\x00(\\d+)\x00", lambda m: kept[int(m.group(1))], out)


def _cells(line: str) -> list[str]:
    """A table row's cells: split at each ``|`` no backslash escapes, ``\\|`` then a ``|`` (as
    GFM reads a row, code spans too)."""
    row = line.strip().removeprefix("|")
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row)]


def _table(lines: Sequence[str], images: Mapping[str, bytes]) -> list[str]:
    head, *body = [ln for i, ln in enumerate(lines) if i != 1]  # line 1 is the |---| rule
    out = ["<table>", "<tr>" + "".join(f"<th>{_inline(c, images)}</th>" for c in _cells(head))]
    out[-1] += "</tr>"
    for row in body:
        out.append(
            "<tr>" + "".join(f"<td>{_inline(c, images)}</td>" for c in _cells(row)) + "</tr>"
        )
    return [*out, "</table>"]


def _is_rule(line: str) -> bool:
    return bool(re.fullmatch(r"\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?", line.strip()))


def markdown_html(md: str, images: Mapping[str, bytes] | None = None) -> str:
    """The HTML body of servelab's own markdown (blocks: headings, tables, lists, paragraphs)."""
    images = images or {}
    lines, out, i = md.splitlines(), [], 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif m := re.match(r"(#{1,6})\s+(.*)", line):
            level = len(m.group(1))
            out.append(f"<h{level}>{_inline(m.group(2), images)}</h{level}>")
            i += 1
        elif line.lstrip().startswith("|") and i + 1 < len(lines) and _is_rule(lines[i + 1]):
            j = i
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                j += 1
            out += _table(lines[i:j], images)
            i = j
        elif re.match(r"\s*[-*]\s+", line):
            out.append("<ul>")
            while i < len(lines) and re.match(r"\s*[-*]\s+", lines[i]):
                item = re.sub(r"^\s*[-*]\s+", "", lines[i])
                out.append(f"<li>{_inline(item, images)}</li>")
                i += 1
            out.append("</ul>")
        else:
            para = []
            while i < len(lines) and lines[i].strip() and not _BLOCK.match(lines[i]):
                para.append(lines[i].strip())
                i += 1
            if not para:  # a line no block rule took: keep it as its own paragraph
                para, i = [line.strip()], i + 1
            out.append(f"<p>{_inline(' '.join(para), images)}</p>")
    return "\n".join(out)


def _num(value: Any, digits: int = 1) -> str:
    if not isinstance(value, (int, float)) or math.isnan(value):
        return "—"
    return f"{value:,.{digits}f}"


def _dist(d: Summary) -> str:
    return f"{_num(d.median)} / {_num(d.p99)}"


def _level_rows(level: LevelSummary | None) -> list[tuple[str, str]]:
    if level is None:
        return [("requests (ok / all)", "— / —")]
    return [
        ("requests (ok / all)", f"{level.n_ok} / {level.n_requests}"),
        ("output tok/s (mean)", _num(level.throughput.mean)),
        ("steady output tok/s (mean)", _num(level.steady_throughput.mean)),
        ("TTFT ms (p50 / p99)", _dist(level.ttft_ms)),
        ("ITL ms (p50 / p99)", _dist(level.itl_ms)),
        ("gap ms (p50 / p99)", _dist(level.gap_ms)),
        ("E2E ms (p50 / p99)", _dist(level.e2e_ms)),
        ("dispatch delay ms (p50 / p99)", _dist(level.dispatch_ms)),
        ("client CPU ms per token", _num(level.client.cpu_ms_per_token, 4)),
    ]


def _judged_rows(stored: StoredRun) -> list[tuple[str, str]]:
    """The run's prefix-cache hit rate and, with an SLO, its goodput and verdicts (a run
    recorded before they were: none)."""
    rows = []
    if stored.cache is not None:
        rows.append(("prefix cache hit rate", cache_text(stored.cache)))
    if stored.slo is not None:
        rows.append(("goodput req/s", _num(stored.goodput, 2)))
        rows += slo_rows(stored.slo)
    return rows


def _telemetry_lines(telemetry: StoredTelemetry | RunTelemetry) -> list[str]:
    """A run's recorded counters, or a soak's."""
    out = ["## What the router and the engines counted", ""]
    for source in telemetry.sources:
        name = md_text(f"{source.service} ({source.kind})")
        if source.state != "ok":
            out += [f"- {name}: unknown ({md_text(str(source.reason))})"]
            continue
        counters = sorted(source.counters.items())
        out += [f"### {name}", "", "| counter | delta | per second |", "|---|---:|---:|"]
        rates = source.rates
        out += [f"| {md_code(k, cell=True)} | {_num(v, 0)} | {_num(rates.get(k), 2)} |"
                for k, v in counters if v]  # fmt: skip
        out.append("")
    return out


def run_phases(run: BenchRunRecord) -> dict[str, StoredPhase] | None:
    """The run's per-phase TTFT percentiles (ms) as recorded, or None (tracing was off)."""
    traces = stored_run(run).traces
    return None if traces is None else dict(traces.phases)


def _phase_lines(summary: StoredTraces, plot: str | None) -> list[str]:
    phases = summary.phases
    out = ["## Where the time to first token went", ""]
    n, untraced = summary.n_requests, summary.n_untraced
    gap = _num(summary.max_abs_gap_ms, 3)
    out += [f"{summary.n_traced} of {n} successful request(s) traced "
            f"({untraced} untraced: no server span, not counted as zero); "
            f"{summary.n_routed} with the router's own span; the phases add up to "
            f"each traced request's TTFT within {gap} ms.", ""]  # fmt: skip
    if plot is not None:
        out += [f"![TTFT phases]({plot})", ""]
    out += ["| phase | p50 ms | p90 ms | p99 ms |", "|---|---:|---:|---:|"]
    for phase, qs in phases.items():
        out.append(f"| {phase} | {_num(qs.p50, 2)} | {_num(qs.p90, 2)} | {_num(qs.p99, 2)} |")
    ret = phases.get("return")
    note = return_note(None if ret is None else ret.p50)
    return [*out, "", *([note[0].upper() + note[1:] + ".", ""] if note else [])]


def _evidence_lines(evidence: Sequence[TelemetryEvidence]) -> list[str]:
    out = ["## The run's telemetry as evidence", ""]
    out += ["The run-telemetry rules (docs/soak.md) over this run's own records and metrics: "
            "evidence only, not a verdict.", ""]  # fmt: skip
    out += ["| rule | subject | reading | cites (metric and delta) |", "|---|---|---|---|"]
    out += [f"| {r} | {s} | {st} | {c} |" for r, s, st, c in evidence_rows(evidence)]
    return [*out, ""]


def run_markdown(run: BenchRunRecord, phase_plot: str | None = None) -> str:
    """The page of one bench run: its configuration, its level summary, and the server side
    (metric deltas; the TTFT decomposition, with ``phase_plot`` inline when given)."""
    stored = stored_run(run)
    level = stored.level
    conc = run.config.get("concurrency", "?") if level is None else level.concurrency
    where = level_label(conc) if isinstance(conc, int) else f"C{conc}"
    out = [f"# Bench run {run.id}: {where}" + (f" ({md_text(run.label)})" if run.label else ""), ""]
    out += [f"Recorded {run.at}; {run.n_records} per-request record(s) kept.", ""]
    out += ["| metric | value |", "|---|---:|"]
    out += [f"| {k} | {v} |" for k, v in [*_level_rows(level), *_judged_rows(stored)]]
    out.append("")
    if stored.failures:
        failures = sorted(stored.failures.items())
        out += ["## Failures", ""] + [f"- {md_text(f'{k}: {v}')}" for k, v in failures] + [""]
    if stored.cut:
        out += ["## Cut", "", "Cut by the run's end (--deadline or a stop), not counted as "
                "failures:", ""]  # fmt: skip
        out += [f"- {md_text(f'{k}: {v}')}" for k, v in sorted(stored.cut.items())] + [""]
    if stored.telemetry is not None:
        out += _telemetry_lines(stored.telemetry)
    if stored.evidence is not None:
        out += _evidence_lines(stored.evidence)
    if stored.traces is not None:
        out += _phase_lines(stored.traces, phase_plot)
    return "\n".join(out) + "\n"


def soak_markdown(soak: SoakRunRecord) -> str:
    """The page of one soak: outcome, sessions, stalls and errors, its failures, matrices and
    why (:func:`~servelab.report.soak.soak.page_sections`), and each finding worded (its title,
    advice and evidence) from the recorded codes."""
    doc = soak.result
    outcome = {True: "passed", False: "failed", None: "unknown"}[soak.ok]
    out = [
        f"# Soak {soak.id}: {outcome}",
        "",
        f"Recorded {soak.at}; ran {doc.elapsed_s:.1f} s.",
        "",
    ]
    s = doc.sessions
    out += ["| sessions | completed | rounds | requests | stalls | errors |",
            "|---:|---:|---:|---:|---:|---:|",
            f"| {s.count} | {s.completed} | {s.rounds_done} | {s.requests} | {len(doc.stalls)} "
            f"| {len(doc.errors)} |", ""]  # fmt: skip
    out += page_sections(doc)
    if doc.telemetry is not None:
        out += _telemetry_lines(doc.telemetry)
    for rank, f in enumerate(doc.findings, 1):
        out += [f"## Finding {rank}: {layer_title(f.layer)}", ""]
        out += [f"- layer: {f.layer}", f"- confidence: {f.confidence:.2f}"]
        out += [f"- worker: {f.worker}"] if f.worker else []
        out += [f"- advice: {finding_advice(f)}", ""]
        lines = [e for e in finding_evidence(f, doc.observations) if e.observation is not None]
        if lines:
            out += ["Evidence:", ""]
            out += [f"- {'supports' if e.supports else 'contradicts'}: {e.text}" for e in lines]
            out.append("")
    return "\n".join(out) + "\n"
