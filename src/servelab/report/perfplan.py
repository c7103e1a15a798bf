"""The perf plan and the A/B pages, from the ledger's export (pure; returns markdown).

:func:`knob_summaries` gathers, per knob, its A/B experiments, its recorded changes, the newest
value a verification read live and the cases' verdicts on it; :func:`perf_plan_markdown` writes
the plan from them and :func:`ab_markdown` one A/B's page. :func:`servelab.report.docs.build_docs`
puts them with the rest of the generated docs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from servelab.core.ab.record import AbRunRecord
from servelab.core.ab.result import AbResult
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.ledger.export import LedgerExport
from servelab.ops.case.case import CaseView
from servelab.report.ab import headline
from servelab.report.answers import answers_lines
from servelab.report.metric import METRIC_UNITS, metric_where
from servelab.report.plots import arm_curve
from servelab.report.text import md_code, md_text, pct, show_value

__all__ = [
    "COMPARISON_HEAD",
    "KnobSummary",
    "LiveReading",
    "ab_markdown",
    "comparison_rows",
    "knob_summaries",
    "perf_plan_markdown",
]


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
        rows.append(f"| {md_text(str(value))} | " + " | ".join(cells) + " |")
    return rows


COMPARISON_HEAD = ["concurrency", "baseline → candidate", "ratio", "95% CI", "verdict"]


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
    out = ["| " + " | ".join(COMPARISON_HEAD) + " |", "|---" * len(COMPARISON_HEAD) + "|"]
    return out + ["| " + " | ".join(map(md_text, r)) + " |" for r in rows]


def _anomaly_lines(ab: AbRunRecord) -> list[str]:
    out = []
    for a in ab.result.anomalies:
        drop = f"{a.drop * 100:.1f}% below C{a.previous}" if math.isfinite(a.drop) else ""
        test = f"Welch one-sided p={a.p_value:.3g}" if math.isfinite(a.p_value) else ""
        tail = "; ".join(part for part in (drop, test) if part)
        arm = md_text(f"arm {a.arm}: {a.kind}")
        out.append(f"- {arm} at C{a.concurrency}" + (f" ({tail})" if tail else ""))
    return out or ["- none"]


def _knob_section(s: KnobSummary, plots: Mapping[int, str]) -> list[str]:
    out = [f"## {md_text(s.service)} {md_code(s.knob)}", ""]
    if s.live is not None:
        where = f"verification #{s.live.verification_id}, {s.live.at}"
        out.append(f"- current live value: **{md_text(show_value(s.live.value))}** ({where})")
    else:
        out.append("- current live value: not verified live yet")
    out.append(f"- env file value (last recorded change): {md_text(show_value(s.file_value))}")
    out += [
        f"- case {cid} ({md_text(title)}): **{md_text(verdict)}**"
        for cid, title, verdict in s.verdicts
    ]
    for ab in s.ab_runs:
        out += ["", f"### A/B #{ab.id} ({ab.at})", "", f"**{headline(ab.result)}**", ""]
        out += [*_arms_table(ab), "", *_comparison_table(ab)]
        out += ["", "Anomalies:", "", *_anomaly_lines(ab)]
        if ab.id in plots:
            out += ["", f"![A/B #{ab.id}]({plots[ab.id]})"]
    if s.changes:
        out += ["", "### Changes", ""]
        out += [
            "- "
            + md_text(
                f"#{c.id} {c.at}: {show_value(c.old)} → {show_value(c.new)}"
                + (f" under case {c.case_id}" if c.case_id else "")
                + (f" — {c.reason}" if c.reason else "")
            )
            for c in s.changes
        ]
    return [*out, ""]


def ab_markdown(ab: AbRunRecord, plot: str | None) -> str:
    """The page of one A/B experiment: the arms, the comparisons, the anomalies, the plot."""
    head = f"# A/B #{ab.id}: {md_text(ab.service)} {md_code(ab.knob)}"
    out = [head, "", f"Recorded {md_text(ab.at)}.", ""]
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
