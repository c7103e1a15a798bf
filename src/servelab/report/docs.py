"""Docs generated from the ledger alone: the perf plan, one page per case, plots, an HTML index.

:func:`build_docs` takes the ledger's export (``Ledger.export()``'s document, or its typed
:class:`~servelab.core.ledger.export.LedgerExport`) and returns ``{relative path: bytes}``; the
CLI's one writer saves them. Everything here is a pure function of the export, so
running it again after a verdict changes rewrites exactly the files that depend on that verdict.

The one-line wording of revert costs, restore plans, conviction tests and timeline entries lives
here too; the CLI prints the same sentences.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never

from servelab.core.ab.record import AbRunRecord
from servelab.core.ab.result import AbResult
from servelab.core.bench.upgrade import stored_level
from servelab.core.case.experiment import ExperimentRecord
from servelab.core.case.model import (
    Case,
    EvidenceAdded,
    KnobChanged,
    Opened,
    RestoreItem,
    Suspected,
    TimelineEntry,
    case_from_rows,
    restore_plan,
    restore_status,
    timeline,
)
from servelab.core.case.probe import BisectConclusion, BisectRecord, ProbeRecord
from servelab.core.case.record import Resolution
from servelab.core.case.revert import ConcurrencyCost, ConvictionTest, RevertCost
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.ledger.codec import decode
from servelab.core.ledger.export import LedgerExport
from servelab.ops.case.case import CaseView
from servelab.report.ab import headline
from servelab.report.answers import answers_lines
from servelab.report.case import (
    describe_bisect_event,
    describe_evidence,
    describe_experiment,
    describe_override,
    event_error,
)
from servelab.report.html import CaseRow, KnobRow, render_index
from servelab.report.metric import METRIC_UNITS, metric_where
from servelab.report.pages import PageLink, html_page, markdown_html, run_markdown, soak_markdown
from servelab.report.plots import ab_plot, arm_curve, run_phase_plot
from servelab.report.text import safe_markdown, show_value

__all__ = [
    "KnobSummary",
    "LiveReading",
    "build_docs",
    "case_markdown",
    "case_views",
    "comparison_rows",
    "describe_conviction",
    "describe_cost",
    "describe_point",
    "describe_restore_item",
    "describe_timeline_entry",
    "knob_summaries",
    "pct",
    "perf_plan_markdown",
]

PERF_PLAN = "perf-plan.md"
INDEX = "index.html"
_SIGNIFICANT = ("better", "worse")


# -- sentences -------------------------------------------------------------------------------


def pct(fraction: float) -> str:
    """``-0.113`` → ``−11.3%`` (a real minus sign), ``0.05`` → ``+5.0%``."""
    return f"{fraction * 100:+.1f}%".replace("-", "−")


def describe_point(point: ConcurrencyCost) -> str:
    """``−11.3% at C64 (95% CI −13.8% … −9.1%)``, ``n.s. at C80``, ``inconclusive at C96``."""
    where = f"C{point.concurrency}"
    if point.verdict == "no significant difference":
        return f"n.s. at {where}"
    if point.change is None or point.verdict not in _SIGNIFICANT:
        return f"inconclusive at {where}"
    text = f"{pct(point.change)} at {where}"
    if point.ci is not None:
        level = f"{point.confidence * 100:g}%"
        text += f" ({level} CI {pct(point.ci[0])} … {pct(point.ci[1])})"
    return text


def describe_cost(cost: RevertCost) -> str:
    """The measured cost of a revert, biggest loss first; says so when nothing measured it."""
    if not cost.measured:
        return (
            f"not measured (no recorded A/B of {cost.service} {cost.knob} compares "
            f"{show_value(cost.from_value)} with {show_value(cost.to_value)})"
        )
    sig = [p for p in cost.points if p.verdict in _SIGNIFICANT and p.change is not None]
    sig.sort(key=lambda p: p.change or 0.0)
    rest = [p for p in cost.points if p not in sig]
    parts = [describe_point(p) for p in (*sig, *rest)]
    return ", ".join(parts) + f" (A/B #{cost.ab_id})"


def describe_restore_item(item: RestoreItem) -> str:
    """``decode K 256 → 512: reverted under case 3 on 2026-…; cost of the revert: …``."""
    text = (
        f"{item.service} {item.knob} {show_value(item.current)} → {show_value(item.restore_to)}: "
        f"reverted under case {item.case_id} on {item.reverted_at[:10]}; "
        f"cost of the revert: {describe_cost(item.cost)}"
    )
    if item.superseded_by is not None:
        text += f"; changed again since (change #{item.superseded_by}): check before restoring"
    return text


def describe_conviction(test: ConvictionTest) -> str:
    """What would convict the knob, and what the ledger already holds of it."""
    knob = test.target.split("/", 1)[-1]
    fail = ", ".join(f"#{i}" for i in test.failing_with) or "none"
    passing = ", ".join(f"#{i}" for i in test.passing_without) or "none"
    head = (
        f"to convict {test.target}: a soak that fails with {knob}={show_value(test.with_value)} "
        f"and passes with {knob}={show_value(test.without_value)}"
    )
    tail = "met" if test.met else "not met"
    return f"{head}; on record: failing with it {fail}, passing without it {passing} ({tail})"


def _outcome(detail: Mapping[str, Any]) -> str:
    error = event_error(detail)
    return "verified live" if error is None else f"FAILED ({error})"


def describe_timeline_entry(entry: TimelineEntry) -> str:
    """One line of a case's timeline."""
    match entry.data:
        case Opened(title=title):
            return f"case opened: {title}"
        case Suspected(target=target, reason=reason):
            return f"suspect {target}" + (f": {reason}" if reason else "")
        case EvidenceAdded(kind="note", note=note):
            return f"note: {note}"
        case EvidenceAdded(kind=kind, ref_id=ref_id):
            return describe_evidence(kind, ref_id)
        case KnobChanged() as c:
            return (
                f"knob change #{c.id}: {c.service} {c.name} "
                f"{show_value(c.old)} → {show_value(c.new)} ({c.reason or 'no reason'})"
            )
        case Resolution():
            return _describe_resolution(entry.data)
        case Mapping() as detail:
            return _describe_event(entry.kind, detail)
        case _:
            assert_never(entry.data)


def _describe_resolution(r: Resolution) -> str:
    verdicts = ", ".join(f"{t} {v}" for t, v in r.verdicts.items())
    later = f" (superseded {r.superseded_at})" if r.superseded_at else ""
    return f"resolved: root cause: {r.root_cause}" + (f"; {verdicts}" if verdicts else "") + later


def _describe_event(kind: str, d: Mapping[str, Any]) -> str:
    """A recorded case event, from its stored detail (read by its kind)."""
    if kind == Resolution.KIND:  # an earlier resolution
        return _describe_resolution(decode(Resolution, d))
    if kind in ("revert", "restore"):
        value = d.get("to", d.get("value"))
        return f"{kind} {d.get('service')} {d.get('knob')} → {show_value(value)}: {_outcome(d)}"
    if kind == ExperimentRecord.KIND:
        return describe_experiment(decode(ExperimentRecord, d))
    if kind in (BisectRecord.KIND, ProbeRecord.KIND, BisectConclusion.KIND):
        return describe_bisect_event(kind, d)
    if kind == "override":
        return describe_override(d)
    return f"{kind}: {json.dumps(dict(d), sort_keys=True, default=str)}"


# -- case views from the export ----------------------------------------------------------------


def case_views(export: LedgerExport) -> list[CaseView]:
    """Every case of the export with its timeline, restore plan and restore status."""
    views = []
    for row in export.cases:
        mine = [c for c in export.knob_changes if c.case_id == row.id]
        case = case_from_rows(row, row.suspects, row.evidence, row.events, mine)
        plan = restore_plan(case, export.ab_runs, export.knob_changes)
        views.append(CaseView(case, timeline(case), plan, restore_status(case, plan)))
    return views


def _evidence_line(kind: str, ref_id: int | None, export: LedgerExport) -> str:
    found = {
        "run": {r.id: f"bench run #{r.id}: {r.label or 'unlabelled'}" for r in export.bench_runs},
        "ab": {r.id: f"A/B #{r.id}: {r.service} {r.knob}" for r in export.ab_runs},
    }
    for soak in export.soak_runs:
        layers = ", ".join(f.layer for f in soak.result.findings) or "none"
        word = "passed" if soak.ok else "FAILED"
        found.setdefault("soak", {})[soak.id] = f"soak #{soak.id}: {word}; findings: {layers}"
    for ver in export.verifications:
        failed = [c for c in ver.checks if not c.ok]
        word = "ok" if ver.ok else f"{len(failed)} check(s) failed"
        found.setdefault("verify", {})[ver.id] = f"verify #{ver.id}: {word}"
    line = found.get(kind, {}).get(ref_id) if ref_id is not None else None
    return line or f"{kind} #{ref_id} (not in this ledger)"


#: Evidence shown by its note: it names no record of another table (an experiment, a bisection's
#: probe and end are case events).
_NOTED = ("note", "experiment", "probe", "bisect")


def case_markdown(view: CaseView, export: LedgerExport) -> str:
    """One case: status, suspects and verdicts, evidence, timeline, restore plan and status."""
    case = view.case
    out = [f"# Case {case.id}: {case.title}", ""]
    out += [f"- status: **{case.status}**", f"- opened: {case.opened_at}"]
    if case.root_cause:
        out.append(f"- root cause: {case.root_cause} (resolved {case.resolved_at})")
    out += [f"- restore: **{view.restore_status}**", "", "## Suspects", ""]
    out += _suspect_table(case)
    out += ["", "## Evidence", ""]
    out += [
        f"- {e.at}: " + (f"{e.kind}: {e.note}" if e.kind in _NOTED else
                         _evidence_line(e.kind, e.ref_id, export))
        for e in case.evidence
    ] or ["(none)"]  # fmt: skip
    out += ["", "## Timeline", ""]
    out += [f"- {e.at} — {describe_timeline_entry(e)}" for e in view.timeline]
    out += ["", "## Restore plan", ""]
    out += [f"- {describe_restore_item(i)}" for i in view.plan] or [f"({view.restore_status})"]
    return "\n".join(out) + "\n"


def _suspect_table(case: Case) -> list[str]:
    if not case.suspects:
        return ["(none)"]
    rows = ["| target | reason | verdict |", "|---|---|---|"]
    rows += [f"| `{s.target}` | {s.reason or ''} | {s.verdict or 'open'} |" for s in case.suspects]
    return rows


# -- the perf plan ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LiveReading:
    """The newest value a verification read live, and which verification it was."""

    value: str | None
    verification_id: int
    at: str


@dataclass
class KnobSummary:
    """Everything the ledger knows about one knob."""

    service: str
    knob: str
    ab_runs: list[AbRunRecord] = field(default_factory=list)
    changes: list[KnobChangeRecord] = field(default_factory=list)
    live: LiveReading | None = None
    verdicts: list[tuple[int, str, str]] = field(default_factory=list)

    @property
    def target(self) -> str:
        return f"knob:{self.service}/{self.knob}"

    @property
    def file_value(self) -> str | None:
        return self.changes[-1].new if self.changes else None


def knob_summaries(export: LedgerExport, views: Sequence[CaseView]) -> list[KnobSummary]:
    """One summary per knob that has an A/B or a recorded change, sorted by service and name."""
    knobs: dict[tuple[str, str], KnobSummary] = {}
    for ab in export.ab_runs:
        key = (ab.service, ab.knob)
        knobs.setdefault(key, KnobSummary(*key)).ab_runs.append(ab)
    for change in export.knob_changes:
        key = (change.service, change.name)
        knobs.setdefault(key, KnobSummary(*key)).changes.append(change)
    for summary in knobs.values():
        summary.live = _latest_live(export, summary)
        summary.verdicts = [
            (v.case.id, v.case.title, verdict)
            for v in views
            if (verdict := v.case.verdict(summary.target)) is not None
        ]
    return [knobs[k] for k in sorted(knobs)]


def _latest_live(export: LedgerExport, s: KnobSummary) -> LiveReading | None:
    for ver in reversed(export.verifications):
        for check in ver.checks:
            if (check.layer, check.service, check.knob) == ("live", s.service, s.knob):
                return LiveReading(check.live, ver.id, ver.at)
    return None


def _fmt(x: float) -> str:
    return f"{x:,.1f}"


def _arms_table(ab: AbRunRecord) -> list[str]:
    curves = {a.value: arm_curve(a) for a in ab.result.arms}
    concs = sorted({c for curve in curves.values() for c, *_ in curve})
    if not concs:
        return ["(no throughput recorded)"]
    metric = ab.result.design.compared
    head = " | ".join(metric_where(metric, c) for c in concs)
    rows = [f"| value ({METRIC_UNITS[metric]}) | {head} |"]
    rows.append("|---" * (len(concs) + 1) + "|")
    for value, curve in curves.items():
        at = {c: (m, s, n) for c, m, s, n in curve}
        cells = [f"{_fmt(at[c][0])} ± {_fmt(at[c][1])} (n={at[c][2]})" if c in at else "—"
                 for c in concs]  # fmt: skip
        rows.append(f"| {value} | " + " | ".join(cells) + " |")
    return rows


_COMPARISON_HEAD = ["concurrency", "baseline → candidate", "ratio", "95% CI", "verdict"]


def comparison_rows(result: AbResult) -> list[list[str]]:
    """The A/B's comparisons as table cells, by concurrency (no header)."""
    rows = []
    for c in sorted(result.comparisons, key=lambda c: c.concurrency):
        ratio, ci = c.ratio, c.ci
        ratio_s = f"{ratio:.3f} ({pct(ratio - 1)})" if math.isfinite(ratio) else "—"
        ci_s = f"{ci[0]:.3f} … {ci[1]:.3f}" if all(map(math.isfinite, ci)) else "—"
        pair = f"{c.baseline} → {c.candidate}"
        where = metric_where(result.design.compared, c.concurrency)
        rows.append([where, pair, ratio_s, ci_s, c.verdict])
    return rows


def _comparison_table(ab: AbRunRecord) -> list[str]:
    rows = comparison_rows(ab.result)
    if not rows:
        return ["(no comparisons)"]
    out = ["| " + " | ".join(_COMPARISON_HEAD) + " |", "|---" * len(_COMPARISON_HEAD) + "|"]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def _anomaly_lines(ab: AbRunRecord) -> list[str]:
    out = []
    for a in ab.result.anomalies:
        drop = f"{a.drop * 100:.1f}% below C{a.previous}" if math.isfinite(a.drop) else ""
        test = f"Welch one-sided p={a.p_value:.3g}" if math.isfinite(a.p_value) else ""
        tail = "; ".join(part for part in (drop, test) if part)
        out.append(f"- arm {a.arm}: {a.kind} at C{a.concurrency}" + (f" ({tail})" if tail else ""))
    return out or ["- none"]


def _knob_section(s: KnobSummary, plots: Mapping[int, str]) -> list[str]:
    out = [f"## {s.service} `{s.knob}`", ""]
    if s.live is not None:
        where = f"verification #{s.live.verification_id}, {s.live.at}"
        out.append(f"- current live value: **{show_value(s.live.value)}** ({where})")
    else:
        out.append("- current live value: not verified live yet")
    out.append(f"- env file value (last recorded change): {show_value(s.file_value)}")
    out += [f"- case {cid} ({title}): **{verdict}**" for cid, title, verdict in s.verdicts]
    for ab in s.ab_runs:
        out += ["", f"### A/B #{ab.id} ({ab.at})", "", f"**{headline(ab.result)}**", ""]
        out += [*_arms_table(ab), "", *_comparison_table(ab)]
        out += ["", "Anomalies:", "", *_anomaly_lines(ab)]
        if ab.id in plots:
            out += ["", f"![A/B #{ab.id}]({plots[ab.id]})"]
    if s.changes:
        out += ["", "### Changes", ""]
        out += [
            f"- #{c.id} {c.at}: {show_value(c.old)} → {show_value(c.new)}"
            + (f" under case {c.case_id}" if c.case_id else "")
            + (f" — {c.reason}" if c.reason else "")
            for c in s.changes
        ]
    return [*out, ""]


def ab_markdown(ab: AbRunRecord, plot: str | None) -> str:
    """The page of one A/B experiment: the arms, the comparisons, the anomalies, the plot."""
    out = [f"# A/B #{ab.id}: {ab.service} `{ab.knob}`", "", f"Recorded {ab.at}.", ""]
    unit = METRIC_UNITS[ab.result.design.compared]
    out += [f"## Arms ({unit})", "", *_arms_table(ab), "", "## Comparisons", ""]
    out += [*_comparison_table(ab), "", "## Anomalies", "", *_anomaly_lines(ab)]
    if ab.result.answers is not None:
        out += ["", *answers_lines(ab.result.answers)]
    if plot is not None:
        out += ["", f"![A/B #{ab.id}]({plot})"]
    return "\n".join(out) + "\n"


def perf_plan_markdown(summaries: Sequence[KnobSummary], plots: Mapping[int, str]) -> str:
    """Per knob: current live value, verdicts of cases, A/B tables, comparisons, anomalies."""
    out = ["# Performance plan", "", "Generated by `servelab report` from the ledger.", ""]
    if not summaries:
        out.append("No knob has an A/B experiment or a recorded change yet.")
    for s in summaries:
        out += _knob_section(s, plots)
    return "\n".join(out).rstrip() + "\n"


# -- the whole set ---------------------------------------------------------------------------


def _latest_verdicts(s: KnobSummary) -> str:
    if not s.ab_runs:
        return "no A/B"
    comps = s.ab_runs[-1].result.comparisons
    return ", ".join(f"C{c.concurrency}: {c.verdict}" for c in comps) or "—"


def build_docs(ledger: Mapping[str, Any] | LedgerExport) -> dict[str, bytes]:
    """Every generated file, ``{relative path: bytes}``: perf plan, cases, plots, index.html;
    from the typed export or its JSON (``ledger export``'s document)."""
    export = ledger if isinstance(ledger, LedgerExport) else decode(LedgerExport, ledger)
    views = case_views(export)
    summaries = knob_summaries(export, views)
    files: dict[str, bytes] = {}
    plots: dict[int, str] = {}
    for s in summaries:
        for ab in s.ab_runs:
            plots[ab.id] = f"plots/ab-{ab.id}.png"
            files[plots[ab.id]] = ab_plot(ab.result, title=f"A/B #{ab.id}: {ab.service} {ab.knob}")
    files[PERF_PLAN] = perf_plan_markdown(summaries, plots).encode()
    for view in views:
        files[f"cases/case-{view.case.id}.md"] = case_markdown(view, export).encode()
    knob_rows = [
        KnobRow(s.service, s.knob,
                show_value(s.live.value) if s.live is not None else "not verified",
                show_value(s.file_value), _latest_verdicts(s),
                [plots[a.id] for a in s.ab_runs],
                [(f"A/B #{a.id}: {s.service} {s.knob}",
                  [_COMPARISON_HEAD, *comparison_rows(a.result)]) for a in s.ab_runs])
        for s in summaries
    ]  # fmt: skip
    case_rows = [
        CaseRow(v.case.id, v.case.title, v.case.status, v.restore_status, v.case.root_cause,
                f"cases/case-{v.case.id}.html", [describe_restore_item(i) for i in v.plan])
        for v in views
    ]  # fmt: skip
    sections = _run_pages(export, files, plots)
    plot_bytes = {path: data for path, data in files.items() if path.startswith("plots/")}
    _html_twins(files, plot_bytes)
    files[INDEX] = render_index(
        knob_rows, case_rows, plot_bytes, _html_name(PERF_PLAN), sections=sections
    ).encode()
    return files


def _html_name(md_path: str) -> str:
    return md_path[:-3] + ".html"


def _run_pages(
    export: LedgerExport, files: dict[str, bytes], plots: Mapping[int, str]
) -> list[tuple[str, list[PageLink]]]:
    """A page per bench run, soak and A/B (markdown; their HTML twins come after)."""
    runs, soaks, abs_ = [], [], []
    for run in export.bench_runs:
        path = f"runs/run-{run.id}.md"
        png = run_phase_plot(run)
        if png is not None:
            files[f"plots/run-{run.id}-ttft.png"] = png
        img = None if png is None else f"../plots/run-{run.id}-ttft.png"
        files[path] = run_markdown(run, img).encode()
        level = stored_level(run.summary)
        conc = "?" if level is None else level.concurrency
        runs.append(
            PageLink(f"#{run.id} C{conc} {run.label or ''}".strip(), _html_name(path), run.at)
        )
    for soak in export.soak_runs:
        path = f"soaks/soak-{soak.id}.md"
        files[path] = soak_markdown(soak).encode()
        outcome = {True: "passed", False: "failed", None: "unknown"}[soak.ok]
        soaks.append(PageLink(f"#{soak.id} {outcome}", _html_name(path), soak.at))
    for ab in export.ab_runs:
        path = f"ab/ab-{ab.id}.md"
        plot = f"../{plots[ab.id]}" if ab.id in plots else None
        files[path] = ab_markdown(ab, plot).encode()
        abs_.append(PageLink(f"#{ab.id} {ab.service} {ab.knob}", _html_name(path), ab.at))
    return [("A/B experiments", abs_), ("Bench runs", runs), ("Soaks", soaks)]


def _html_twins(files: dict[str, bytes], plot_bytes: Mapping[str, bytes]) -> None:
    """Every markdown page gets an HTML twin with its plots inline (from any directory)."""
    images = {**plot_bytes, **{f"../{k}": v for k, v in plot_bytes.items()}}
    for path in [p for p in files if p.endswith(".md")]:
        files[path] = (md := safe_markdown(files[path].decode())).encode()
        title = next((ln.lstrip("# ") for ln in md.splitlines() if ln.startswith("#")), path)
        files[_html_name(path)] = html_page(title, markdown_html(md, images)).encode()
