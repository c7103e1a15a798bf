"""Paired A/B analysis: one candidate/baseline ratio per round (pure).

Each round measures both arms under the same conditions (back to back, counterbalanced order),
so the per-round ratio ``r_i = candidate_i / baseline_i`` cancels what the two visits share
(machine drift, a neighbour, cache growth). The estimator works on ``d_i = ln r_i``:

- the estimate is ``exp(mean d)``, the geometric mean of the per-round ratios;
- the interval is Student's t interval on ``mean d`` (n rounds, df n − 1), mapped back by ``exp``
  (the paired t interval on log ratios, e.g. Julious 2004; ``scipy.stats.t``);
- for small n (fewer than ``bootstrap_below`` rounds) a seeded percentile bootstrap of ``mean d``
  (``scipy.stats.bootstrap``) is shown next to it. It is **not** used for the verdict: with a
  handful of rounds the percentile bootstrap is known to be too narrow (it cannot see variance the
  few resamples do not contain), so the t interval decides and the bootstrap is a cross-check.

Fewer than two complete rounds, a non-positive throughput, or log ratios with zero variance give
"inconclusive", never "significant".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from servelab.core.stats import INCONCLUSIVE, bootstrap_interval, sample_std, t_quantile

__all__ = ["BOOTSTRAP_BELOW", "PairedRatio", "log_ratios", "paired_ratio"]

#: Below this many rounds the bootstrap interval is shown next to the t interval.
BOOTSTRAP_BELOW = 10


@dataclass(frozen=True, slots=True)
class PairedRatio:
    """The paired estimate of candidate/baseline over ``n`` rounds, its t interval (``ci``) and,
    for small n, the bootstrap interval (``bootstrap_ci``, None when not computed)."""

    n: int
    ratio: float
    ci: tuple[float, float]
    confidence: float
    verdict: str
    method: str
    log_ratios: tuple[float, ...]
    sd_log: float
    bootstrap_ci: tuple[float, float] | None = None
    bootstrap_method: str = ""
    reason: str = ""


def log_ratios(baseline: Sequence[float], candidate: Sequence[float]) -> tuple[float, ...]:
    """``ln(candidate_i / baseline_i)`` for every complete round (pairs by position)."""
    return tuple(math.log(c / b) for b, c in zip(baseline, candidate, strict=False))


def _method(n: int) -> str:
    return f"paired t interval on the mean log ratio (n={n} rounds, df={max(n - 1, 0)})"


def _inconclusive(n: int, ratio: float, confidence: float, reason: str) -> PairedRatio:
    nan = (math.nan, math.nan)
    return PairedRatio(n, ratio, nan, confidence, INCONCLUSIVE, _method(n), (), math.nan, None,
                       "", reason)  # fmt: skip


def paired_ratio(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    confidence: float = 0.95,
    seed: int = 0,
    bootstrap_below: int = BOOTSTRAP_BELOW,
) -> PairedRatio:
    """The paired analysis of rounds ``(baseline[i], candidate[i])`` with a verdict against 1:
    "A>B" (candidate higher), "A<B", "not significant" or "inconclusive"."""
    n = min(len(baseline), len(candidate))
    if any(v <= 0 for v in (*baseline[:n], *candidate[:n])):
        return _inconclusive(n, math.nan, confidence, "a non-positive throughput")
    d = log_ratios(baseline, candidate)
    ratio = math.exp(sum(d) / n) if n else math.nan
    if n < 2:
        return _inconclusive(n, ratio, confidence, "fewer than 2 complete rounds")
    sd = sample_std(d)
    if sd == 0.0:
        return _inconclusive(n, ratio, confidence, "zero variance of the per-round log ratios")
    m = sum(d) / n
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
    low, high = math.exp(m - half), math.exp(m + half)
    verdict = "A>B" if low > 1.0 else "A<B" if high < 1.0 else "not significant"
    boot, boot_method = None, ""
    if n < bootstrap_below:
        b = bootstrap_interval(list(d), seed=seed, confidence=confidence)
        boot = (math.exp(b.low), math.exp(b.high)) if b.conclusive else None
        boot_method = f"{b.method} of the mean log ratio; shown, not used for the verdict"
    return PairedRatio(n, ratio, (low, high), confidence, verdict, _method(n), d, sd, boot,
                       boot_method)  # fmt: skip
