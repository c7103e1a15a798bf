"""PNG plots of recorded A/B experiments (bytes; the caller saves them).

matplotlib with the Agg canvas set explicitly on each figure (no pyplot, no GUI, no global backend
switch at import). Output is deterministic for the same input: no timestamps in the PNG metadata.
"""

from __future__ import annotations

import io
import math

from servelab.core.evidence import AbRunRecord
from servelab.core.results import AbArm
from servelab.core.stats import mean, sample_std

__all__ = ["ab_plot", "arm_curve"]

_PNG_METADATA = {"Software": None}


def arm_curve(arm: AbArm) -> list[tuple[int, float, float, int]]:
    """``(concurrency, mean, σ, n)`` of an arm's throughput repeats, by concurrency (σ 0 if n<2)."""
    points = []
    for conc, values in arm.throughput.items():
        nums = [float(v) for v in values or [] if isinstance(v, (int, float))]
        if not nums:
            continue
        std = sample_std(nums)
        points.append((int(conc), mean(nums), 0.0 if math.isnan(std) else std, len(nums)))
    return sorted(points)


def ab_plot(ab_run: AbRunRecord, *, title: str | None = None) -> bytes:
    """Output-token throughput vs concurrency, one line per arm, error bars ± σ; PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # heavy: only when plotting
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ticks: set[int] = set()
    for arm in ab_run.result.arms:
        curve = arm_curve(arm)
        if not curve:
            continue
        xs, ys, errs, _ns = zip(*curve, strict=True)
        ticks.update(xs)
        label = f"{ab_run.knob}={arm.value}"
        ax.errorbar(xs, ys, yerr=errs, marker="o", capsize=3, label=label)
    ax.set_xticks(sorted(ticks))
    ax.set_xlabel("concurrency")
    ax.set_ylabel("output tokens/s (mean ± σ)")
    default = f"A/B #{ab_run.id}: {ab_run.service} {ab_run.knob}"
    ax.set_title(title or default, fontsize=10)
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata=_PNG_METADATA)
    return buf.getvalue()
