"""PNG plots of recorded A/B experiments and tunes, of where bench runs' TTFT went, and of an
open-loop run's load next to its TTFT (bytes; the caller saves them).

matplotlib with the Agg canvas set explicitly on each figure (no pyplot, no GUI, no global backend
switch at import). Output is deterministic for the same input: no timestamps in the PNG metadata.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from servelab.core.ab.result import AbArm, AbMetric, AbResult
from servelab.core.ab.tune import TuneState
from servelab.core.bench.record import BenchRunRecord
from servelab.core.bench.upgrade import stored_level
from servelab.core.load.metrics import ttft_ns
from servelab.core.load.records import RequestRecord
from servelab.core.stats import mean, sample_std
from servelab.core.telemetry.traces import PHASES
from servelab.report.metric import METRIC_AXES, metric_where
from servelab.report.pages import run_phases

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["ab_figure", "ab_plot", "arm_curve", "load_series", "load_ttft_plot", "run_phase_plot",
           "ttft_phase_plot", "tune_plot"]  # fmt: skip

_PNG_METADATA = {"Software": None}


def arm_curve(arm: AbArm) -> list[tuple[int, float, float, int]]:
    """``(concurrency, mean, σ, n)`` of an arm's throughput repeats, by concurrency (σ 0 if n<2)."""
    points = []
    for conc, values in arm.throughput.items():
        if not values:
            continue
        std = sample_std(values)
        points.append((conc, mean(values), 0.0 if math.isnan(std) else std, len(values)))
    return sorted(points)


def ab_figure(result: AbResult, *, title: str) -> Figure:
    """The compared metric (its unit from :data:`~servelab.report.metric.METRIC_AXES`) against
    concurrency, one line per arm, error bars ± σ."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # heavy: only when plotting
    from matplotlib.figure import Figure

    metric = result.design.compared
    fig = Figure(figsize=(6.4, 4.0), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ticks: set[int] = set()
    for arm in result.arms:
        curve = arm_curve(arm)
        if not curve:
            continue
        xs, ys, errs, _ns = zip(*curve, strict=True)
        ticks.update(xs)
        label = f"{result.knob}={arm.value}"
        ax.errorbar(xs, ys, yerr=errs, marker="o", capsize=3, label=label)
    ax.set_xticks(sorted(ticks), [metric_where(metric, x) for x in sorted(ticks)])
    ax.set_xlabel("capacity search" if metric == AbMetric.CAPACITY else "concurrency")
    ax.set_ylabel(f"{METRIC_AXES[metric]} (mean ± σ)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def ab_plot(result: AbResult, *, title: str) -> bytes:
    """:func:`ab_figure` as PNG bytes."""
    buf = io.BytesIO()
    ab_figure(result, title=title).savefig(buf, format="png", metadata=_PNG_METADATA)
    return buf.getvalue()


def ttft_phase_plot(
    bars: Sequence[tuple[str, Mapping[str, float]]],
    *,
    title: str,
    phases: Sequence[str] = PHASES,
) -> bytes:
    """One stacked bar per ``(label, {phase: ms})`` (a concurrency level or a run), segments in
    ``phases`` order (their medians: the stack is the median of each phase, not a TTFT); PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # heavy: only when plotting
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    labels = [label for label, _ in bars]
    bottoms = [0.0] * len(bars)
    for phase in phases:
        heights = [max(float(values.get(phase, 0.0)), 0.0) for _, values in bars]
        ax.bar(labels, heights, bottom=bottoms, label=phase)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    ax.set_ylabel("ms (median of each phase)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata=_PNG_METADATA)
    return buf.getvalue()


def run_phase_plot(run: BenchRunRecord) -> bytes | None:
    """The stacked bar of one recorded run's phase medians; None when it was not traced."""
    phases = run_phases(run)
    if not phases:
        return None
    p50 = {name: q.p50 or 0.0 for name, q in phases.items()}
    level = stored_level(run)
    conc = "?" if level is None else level.concurrency
    return ttft_phase_plot([(f"C{conc}", p50)], title=f"Bench run #{run.id}: where the TTFT went")


def tune_plot(levels: Sequence[tuple[int, TuneState]], *, title: str, unit: str) -> bytes:
    """One panel per concurrency: each arm's value per block (a line that ends where the arm was
    dropped), the leader's drawn thicker; PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # heavy: only when plotting
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.0 * max(len(levels), 1) + 1.0, 4.0), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, max(len(levels), 1), squeeze=False)[0]
    for ax, (level, state) in zip(axes, levels, strict=False):
        leader = state.leader if any(state.values.values()) else None
        for arm in state.arms:
            values = state.values[arm]
            if values:
                ax.plot(range(1, len(values) + 1), values, marker="o", label=arm,
                        linewidth=2.5 if arm == leader else 1.0)  # fmt: skip
        ax.set_xlabel("block")
        ax.set_ylabel(unit)
        ax.set_title(f"C{level}" if level else "capacity", fontsize=10)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata=_PNG_METADATA)
    return buf.getvalue()


def load_series(
    records: Sequence[RequestRecord],
) -> tuple[list[tuple[float, int]], list[tuple[float, float]], list[tuple[float, float]]]:
    """Seconds from the first scheduled send: the requests in flight after each send and end
    (a step), the arrivals per second in about 60 bins, and each successful request's TTFT (ms)
    at its scheduled time."""
    measured = [r for r in records if not r.warmup and r.sent_ns]
    if not measured:
        return [], [], []
    t0 = min(r.scheduled_ns for r in measured)
    marks = sorted([(r.sent_ns, 1) for r in measured]
                   + [(r.end_ns, -1) for r in measured if r.end_ns is not None])  # fmt: skip
    flight, level = [], 0
    for t, step in marks:
        level += step
        flight.append(((t - t0) / 1e9, level))
    span = max((t for t, _ in flight), default=0.0)
    width = max(span / 60, 0.1)
    bins = [0] * (int(span / width) + 1)
    for r in measured:
        bins[min(int((r.scheduled_ns - t0) / 1e9 / width), len(bins) - 1)] += 1
    arrivals = [(i * width, n / width) for i, n in enumerate(bins)]
    ttfts = [((r.scheduled_ns - t0) / 1e9, x / 1e6)
             for r in measured if r.ok and (x := ttft_ns(r)) is not None]  # fmt: skip
    return flight, arrivals, ttfts


def load_ttft_plot(
    records: Sequence[RequestRecord], *, title: str, ttft_limit_ms: float | None = None
) -> bytes:
    """Two panels on one time axis: the load (requests in flight, arrivals per second) above,
    each request's TTFT below (with the SLO's TTFT limit when given); PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # heavy: only when plotting
    from matplotlib.figure import Figure

    flight, arrivals, ttfts = load_series(records)
    fig = Figure(figsize=(7.2, 5.2), dpi=100)
    FigureCanvasAgg(fig)
    load_ax, ttft_ax = fig.subplots(2, 1, sharex=True)
    if flight:
        load_ax.step([t for t, _ in flight], [n for _, n in flight], where="post",
                     label="in flight")  # fmt: skip
    if arrivals:
        width = arrivals[1][0] - arrivals[0][0] if len(arrivals) > 1 else 0.1
        load_ax.bar([t for t, _ in arrivals], [r for _, r in arrivals], width=width,
                    align="edge", alpha=0.35, label="arrivals / s")  # fmt: skip
    load_ax.set_ylabel("requests")
    load_ax.set_title(title, fontsize=10)
    load_ax.grid(True, alpha=0.3)
    load_ax.legend(fontsize=7, loc="upper left")
    if ttfts:
        ttft_ax.scatter([t for t, _ in ttfts], [v for _, v in ttfts], s=4, label="TTFT")
    if ttft_limit_ms is not None:
        ttft_ax.axhline(ttft_limit_ms, color="red", linewidth=1, label="SLO limit")
        ttft_ax.legend(fontsize=7, loc="upper left")
    ttft_ax.set_xlabel("seconds from the first scheduled request")
    ttft_ax.set_ylabel("TTFT ms")
    ttft_ax.grid(True, alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata=_PNG_METADATA)
    return buf.getvalue()
