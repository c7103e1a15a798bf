"""Named estimators for benchmark numbers (pure; randomness only through a seed passed in).

- ``summarize``: n, mean, sample standard deviation (n − 1), median, p90, p99, min, max.
  Percentiles use linear interpolation between closest ranks (Hyndman & Fan 1996, type 7;
  numpy's default ``linear`` method).
- ``t_interval``: Student-t confidence interval for the mean of repeated runs (e.g. throughput of K
  repeats). The t distribution is ``scipy.stats.t``.
- ``bootstrap_interval``: percentile bootstrap of a statistic (Efron & Tibshirani 1993, ch. 13),
  by ``scipy.stats.bootstrap``, seeded.
- ``welch_difference``: Welch's t-test for mean(b) − mean(a) of two independent samples
  (Welch 1947, Welch–Satterthwaite df), with its interval and a one-sided p-value.
- ``ratio_interval``: Fieller's interval for the ratio of two independent means (Fieller 1954;
  cov = 0, Welch–Satterthwaite degrees of freedom). It is unbounded when the denominator's mean is
  not significantly non-zero; that, or fewer than ``min_n`` samples per side, gives "inconclusive".
- ``mcnemar_exact_p``: the exact (binomial) McNemar test on the discordant pairs of paired binary
  outcomes (McNemar 1947; the exact form, Mosteller 1952): two-sided, the smaller tail of
  Binomial(f + g, 1/2) doubled, computed with :func:`math.comb` (no scipy import).
- ``newcombe_paired_interval``: Newcombe's hybrid score interval for the difference of two paired
  proportions (Newcombe 1998, "Improved confidence intervals for the difference between binomial
  proportions based on paired data", Stat Med 17:2635, method 10: the two Wilson score intervals
  combined with the phi correlation of the 2x2 table, without continuity correction).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from statistics import NormalDist
from typing import Any

from pydantic import computed_field

__all__ = [
    "INCONCLUSIVE",
    "PERCENTILE_METHOD",
    "Difference",
    "Interval",
    "IntervalVerdict",
    "RatioInterval",
    "Summary",
    "bootstrap_interval",
    "mcnemar_exact_p",
    "mean",
    "median",
    "newcombe_paired_interval",
    "numpy_module",
    "percentile",
    "ratio_interval",
    "sample_std",
    "scipy_stats",
    "summarize",
    "t_interval",
    "t_quantile",
    "welch_difference",
    "wilson_score",
]


def scipy_stats() -> Any:
    """``scipy.stats``, imported on first use: it costs every command about 1.5 s of CPU at
    start-up, and only the statistics need it."""
    from scipy import stats

    return stats


def numpy_module() -> Any:
    """numpy, imported with scipy on first use."""
    import numpy

    return numpy


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


class IntervalVerdict(StrEnum):
    """Whether an interval could be computed (stored: values unchanged)."""

    OK = "ok"
    INCONCLUSIVE = "inconclusive"


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

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> IntervalVerdict:
        """:attr:`conclusive` as a code (written with the interval, ignored when read)."""
        return IntervalVerdict.OK if self.conclusive else IntervalVerdict.INCONCLUSIVE


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


@dataclass(frozen=True, slots=True)
class Difference:
    """``mean(b) − mean(a)`` of two independent samples with its interval, and the one-sided
    p-value of ``mean(b) < mean(a)`` (Welch's t-test); nan where it cannot be computed."""

    estimate: float
    low: float
    high: float
    confidence: float
    p_less: float
    df: float
    n_a: int
    n_b: int
    method: str

    @property
    def conclusive(self) -> bool:
        """True when the test could be computed (two values a side, some variance)."""
        return not math.isnan(self.p_less)


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


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``scipy.stats.t``)."""
    return float(scipy_stats().t.ppf(p, df))


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
    """Percentile bootstrap interval of ``statistic`` (``scipy.stats.bootstrap``, seeded; nan
    bounds below two values or when every resample gives the same statistic)."""
    n, estimate = len(values), statistic(values) if values else math.nan
    method = f"percentile bootstrap ({resamples} resamples, seed {seed})"
    if n < 2 or min(values) == max(values):
        return Interval(estimate, math.nan, math.nan, confidence, method, n)
    res = scipy_stats().bootstrap(
        (numpy_module().asarray(values, dtype=float),),
        lambda sample: statistic([float(v) for v in sample]),
        vectorized=False,
        n_resamples=resamples,
        confidence_level=confidence,
        method="percentile",
        rng=numpy_module().random.default_rng(seed),
    )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
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


def welch_difference(
    a: Sequence[float], b: Sequence[float], *, confidence: float = 0.90
) -> Difference:
    """Welch's t-test of ``mean(b) − mean(a)`` (Welch 1947): the two-sided ``confidence``
    interval and the one-sided p-value of ``mean(b) < mean(a)``. At 90% the interval's upper
    end is the one-sided 95% bound, so "upper end below 0" and "p < 0.05" agree."""
    diff = mean(b) - mean(a) if a and b else math.nan
    method = "Welch's t-test (one-sided), Welch-Satterthwaite df"
    nan = Difference(
        diff, math.nan, math.nan, confidence, math.nan, math.nan, len(a), len(b), method
    )
    if len(a) < 2 or len(b) < 2:
        return nan
    va, vb = sample_std(a) ** 2 / len(a), sample_std(b) ** 2 / len(b)
    if va + vb == 0.0:
        return nan
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    se = math.sqrt(va + vb)
    half = t_quantile(0.5 + confidence / 2.0, df) * se
    p_less = float(scipy_stats().t.cdf(diff / se, df))
    return Difference(
        diff, diff - half, diff + half, confidence, p_less, df, len(a), len(b), method
    )


def mcnemar_exact_p(f: int, g: int) -> float:
    """Two-sided exact McNemar p-value of ``f`` pairs discordant one way against ``g`` the other:
    twice the smaller tail of Binomial(f + g, 1/2), at most 1 (1 when no pair is discordant)."""
    n = f + g
    if n == 0:
        return 1.0
    k = min(f, g)
    tail: float = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def wilson_score(x: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval of the proportion ``x/n`` (``(0, 1)`` when ``n`` is 0)."""
    if n <= 0:
        return 0.0, 1.0
    z, p = _normal_quantile(confidence), x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _normal_quantile(confidence: float) -> float:
    """The two-sided standard normal quantile of ``confidence`` (1.96 at 0.95)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def newcombe_paired_interval(
    both: int, first_only: int, second_only: int, neither: int, confidence: float = 0.95
) -> Interval:
    """Newcombe's method-10 interval of ``p1 − p2`` for paired binary outcomes: ``both`` pairs
    with the outcome on both sides, ``first_only``/``second_only`` on one side, ``neither``."""
    e, f, g, h = both, first_only, second_only, neither
    n = e + f + g + h
    method = "Newcombe 1998 paired hybrid score interval (method 10)"
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, confidence, method, 0)
    p1, p2 = (e + f) / n, (e + g) / n
    l1, u1 = wilson_score(e + f, n, confidence)
    l2, u2 = wilson_score(e + g, n, confidence)
    denominator = (e + f) * (g + h) * (e + g) * (f + h)
    phi = (e * h - f * g) / math.sqrt(denominator) if denominator > 0 else 0.0
    d = p1 - p2
    lower = d - math.sqrt(
        max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    )
    upper = d + math.sqrt(
        max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    )
    return Interval(d, max(-1.0, lower), min(1.0, upper), confidence, method, n)
