"""Rendering an A/B result: the perf-plan markdown (``+12.8% at C64``), a console table, a plot."""

from __future__ import annotations

import math

from servelab.core.compare import INCONCLUSIVE, NO_DIFFERENCE, Comparison
from servelab.core.evidence import AbRunRecord
from servelab.ops.ab import AbResult
from servelab.report.plots import ab_plot

__all__ = ["ab_markdown", "ab_png", "change_phrase", "headline"]


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x * 100:+.1f}%"


def change_phrase(c: Comparison) -> str:
    """``+12.8% at C64`` for a significant change, ``+1.2% at C80 (n.s.)`` otherwise."""
    tail = {NO_DIFFERENCE: " (n.s.)", INCONCLUSIVE: " (inconclusive)"}.get(c.verdict, "")
    return f"{_pct(c.change)} at C{c.concurrency}{tail}"


def headline(result: AbResult) -> str:
    """One line: what the candidate did against the baseline at every concurrency."""
    cfg = result.config
    phrases = ", ".join(change_phrase(c) for c in result.comparisons) or "no comparison"
    return f"{cfg.service} {cfg.knob} {cfg.baseline} → {cfg.candidate}: {phrases}"


def _ci(c: Comparison) -> str:
    lo, hi = c.ci
    if math.isnan(lo):
        return "unbounded"
    return f"[{_pct(lo - 1)}, {_pct(hi - 1)}]"


def _arm_mean(result: AbResult, arm: str, conc: int) -> str:
    values = result.throughput(arm).get(conc, [])
    return f"{sum(values) / len(values):.1f} (n={len(values)})" if values else "—"


def ab_markdown(result: AbResult) -> str:
    """The perf-plan table: per concurrency both arms' mean throughput, change, CI, verdict."""
    cfg = result.config
    lines = [
        f"## {cfg.service} `{cfg.knob}`: {cfg.baseline} → {cfg.candidate}",
        "",
        f"**{headline(result)}**",
        "",
        f"| C | {cfg.knob}={cfg.baseline} tok/s | {cfg.knob}={cfg.candidate} tok/s "
        "| change | 95% CI | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for c in result.comparisons:
        lines.append(
            f"| {c.concurrency} | {_arm_mean(result, cfg.baseline, c.concurrency)} "
            f"| {_arm_mean(result, cfg.candidate, c.concurrency)} | {_pct(c.change)} "
            f"| {_ci(c)} | {c.verdict} |"
        )
    lines += [
        "",
        "Ratio of mean output-token throughput, candidate/baseline; "
        f"{result.comparisons[0].method if result.comparisons else ''}.",
    ]
    for a in result.anomalies:
        lines.append(
            f"- anomaly: with {cfg.knob}={a.arm}, throughput at C{a.concurrency} "
            f"({a.throughput:.1f} tok/s) is {a.drop * 100:.1f}% below C{a.previous} "
            f"({a.previous_throughput:.1f} tok/s)"
        )
    if not result.anomalies:
        lines.append("- no anomaly: throughput rises with concurrency in both arms")
    return "\n".join(lines) + "\n"


def ab_png(result: AbResult) -> bytes:
    """Throughput against concurrency for both arms (PNG bytes)."""
    cfg = result.config
    run = AbRunRecord(result.ab_id or 0, "", cfg.service, cfg.knob, cfg.to_dict(), result.record())
    return ab_plot(run, title=f"A/B #{result.ab_id}: {cfg.service} {cfg.knob}")
