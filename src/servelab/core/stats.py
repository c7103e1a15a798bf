"""Named estimators for benchmark numbers (pure; randomness only through a seed passed in).

- ``summarize``: n, mean, sample standard deviation (n − 1), median, p90, p99, min, max.
  Percentiles use linear interpolation between closest ranks (Hyndman & Fan 1996, type 7;
  numpy's default ``linear`` method).
- ``t_interval``: Student-t confidence interval for the mean of repeated runs (e.g. throughput of K
  repeats). The t quantile comes from the regularized incomplete beta function (continued fraction,
  Numerical Recipes §6.4) inverted by bisection; no SciPy.
- ``bootstrap_interval``: percentile bootstrap of a statistic (Efron & Tibshirani 1993, ch. 13),
  seeded.
- ``ratio_interval``: Fieller's interval for the ratio of two independent means (Fieller 1954;
  cov = 0, Welch–Satterthwaite degrees of freedom). It is unbounded when the denominator's mean is
  not significantly non-zero; that, or fewer than ``min_n`` samples per side, gives "inconclusive".
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "INCONCLUSIVE",
    "PERCENTILE_METHOD",
    "Interval",
    "RatioInterval",
    "Summary",
    "bootstrap_interval",
    "mean",
    "median",
    "percentile",
    "ratio_interval",
    "sample_std",
    "summarize",
    "t_interval",
    "t_quantile",
]

PERCENTILE_METHOD = "linear interpolation between closest ranks (Hyndman & Fan type 7)"
INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True, slots=True)
class Summary:
    """Descriptive statistics of one sample (``nan`` where the sample is too small)."""

    n: int
    mean: float
    std: float
    median: float
    p90: float
    p99: float
    min: float
    max: float


@dataclass(frozen=True, slots=True)
class Interval:
    """A confidence interval and the estimator that made it; ``low``/``high`` nan if too few."""

    estimate: float
    low: float
    high: float
    confidence: float
    method: str
    n: int

    @property
    def conclusive(self) -> bool:
        """True when the interval could be computed."""
        return not (math.isnan(self.low) or math.isnan(self.high))


@dataclass(frozen=True, slots=True)
class RatioInterval:
    """Ratio of means A/B with its interval and a verdict: "A>B", "A<B", "not significant",
    or "inconclusive" (``reason`` says why)."""

    ratio: float
    low: float
    high: float
    confidence: float
    verdict: str
    method: str
    reason: str = ""


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean (``nan`` for an empty sample)."""
    return sum(values) / len(values) if values else math.nan


def sample_std(values: Sequence[float]) -> float:
    """Sample standard deviation with Bessel's correction (``nan`` below two values)."""
    if len(values) < 2:
        return math.nan
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of an ascending sample, type-7 interpolation."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    """The median (50th percentile, type 7)."""
    return percentile(sorted(values), 50.0)


def summarize(values: Sequence[float]) -> Summary:
    """n, mean ± sample σ, median, p90, p99, min, max of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return Summary(0, *([math.nan] * 7))
    return Summary(
        n=len(ordered),
        mean=mean(ordered),
        std=sample_std(ordered),
        median=percentile(ordered, 50),
        p90=percentile(ordered, 90),
        p99=percentile(ordered, 99),
        min=ordered[0],
        max=ordered[-1],
    )


def _beta_cf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(ln_front + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_cf(a, b, x) / a
    return 1.0 - front * _beta_cf(b, a, 1.0 - x) / b


def _t_cdf(t: float, df: float) -> float:
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile (0.5 < p < 1) of Student's t with ``df`` degrees of freedom."""
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if _t_cdf(mid, df) < p else (lo, mid)
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2.0


def t_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """Student-t interval for the mean; nan bounds (inconclusive) below two values."""
    n, m = len(values), mean(values)
    method = "Student-t interval of the mean"
    if n < 2:
        return Interval(m, math.nan, math.nan, confidence, method, n)
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * sample_std(values) / math.sqrt(n)
    return Interval(m, m - half, m + half, confidence, method, n)


def bootstrap_interval(
    values: Sequence[float],
    *,
    seed: int,
    statistic: Callable[[Sequence[float]], float] = mean,
    resamples: int = 2000,
    confidence: float = 0.95,
) -> Interval:
    """Percentile bootstrap interval of ``statistic`` (seeded; nan bounds below two values)."""
    n, estimate = len(values), statistic(values) if values else math.nan
    method = f"percentile bootstrap ({resamples} resamples, seed {seed})"
    if n < 2:
        return Interval(estimate, math.nan, math.nan, confidence, method, n)
    rng = random.Random(seed)
    stats = sorted(statistic(rng.choices(values, k=n)) for _ in range(resamples))
    alpha = (1.0 - confidence) / 2.0 * 100.0
    low, high = percentile(stats, alpha), percentile(stats, 100.0 - alpha)
    return Interval(estimate, low, high, confidence, method, n)


def _inconclusive(ratio: float, confidence: float, reason: str) -> RatioInterval:
    method = "Fieller interval of a ratio of independent means"
    return RatioInterval(ratio, math.nan, math.nan, confidence, INCONCLUSIVE, method, reason)


def ratio_interval(
    a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95, min_n: int = 2
) -> RatioInterval:
    """Fieller's interval for mean(a) / mean(b) with a verdict against 1."""
    ma, mb = mean(a), mean(b)
    ratio = ma / mb if b and mb != 0 else math.nan
    if len(a) < min_n or len(b) < min_n:
        return _inconclusive(ratio, confidence, f"fewer than {min_n} samples on a side")
    va, vb = sample_std(a) ** 2 / len(a), sample_std(b) ** 2 / len(b)
    if va + vb == 0.0:
        return _inconclusive(ratio, confidence, "zero variance on both sides")
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    t = t_quantile(0.5 + confidence / 2.0, df)
    g = t * t * vb / (mb * mb) if mb != 0 else math.inf
    if g >= 1.0:
        return _inconclusive(ratio, confidence, "denominator mean not significantly non-zero")
    half = (t / abs(mb)) * math.sqrt(va + ratio * ratio * vb - g * va)
    low, high = (ratio - half) / (1.0 - g), (ratio + half) / (1.0 - g)
    verdict = "A>B" if low > 1.0 else "A<B" if high < 1.0 else "not significant"
    method = f"Fieller interval of a ratio of independent means (Welch df={df:.1f})"
    return RatioInterval(ratio, low, high, confidence, verdict, method)
