"""PNG plots of recorded A/B experiments and tunes, and of where bench runs' TTFT went (bytes; the
caller saves them).

matplotlib with the Agg canvas set explicitly on each figure (no pyplot, no GUI, no global backend
switch at import). Output is deterministic for the same input: no timestamps in the PNG metadata.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence

from servelab.core.ab.result import AbArm, AbResult
from servelab.core.ab.tune import TuneState
from servelab.core.ledger.evidence import BenchRunRecord
from servelab.core.stats import mean, sample_std
from servelab.core.telemetry.traces import PHASES
from servelab.report.pages import run_phases

__all__ = ["ab_plot", "arm_curve", "run_phase_plot", "ttft_phase_plot", "tune_plot"]

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


def ab_plot(result: AbResult, *, title: str) -> bytes:
    """Output-token throughput vs concurrency, one line per arm, error bars ± σ; PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # heavy: only when plotting
    from matplotlib.figure import Figure

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
    ax.set_xticks(sorted(ticks))
    ax.set_xlabel("concurrency")
    ax.set_ylabel("output tokens/s (mean ± σ)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata=_PNG_METADATA)
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
    p50 = {name: float(q.get("p50") or 0.0) for name, q in phases.items()}
    conc = (run.summary.get("level") or {}).get("concurrency", "?")
    return ttft_phase_plot([(f"C{conc}", p50)], title=f"Bench run #{run.id}: where the TTFT went")


def tune_plot(levels: Sequence[tuple[int, TuneState]], *, title: str) -> bytes:
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
        ax.set_ylabel("output tokens/s")
        ax.set_title(f"C{level}", fontsize=10)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata=_PNG_METADATA)
    return buf.getvalue()
