"""Named estimators: percentiles (type 7), t intervals, bootstrap, Fieller ratio verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from servelab.core import stats


def test_summary_matches_type7_percentiles() -> None:
    summary = stats.summarize([float(x) for x in range(1, 101)])
    assert (summary.n, summary.mean, summary.median) == (100, 50.5, 50.5)
    assert summary.p90 == pytest.approx(90.1)
    assert summary.p99 == pytest.approx(99.01)
    assert summary.std == pytest.approx(29.011491975882016)


def test_small_samples_are_nan_not_errors() -> None:
    assert stats.summarize([]).n == 0
    assert math.isnan(stats.summarize([3.0]).std)
    assert not stats.t_interval([3.0]).conclusive


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [
        (0.975, 1, 12.7062),
        (0.975, 2, 4.3027),
        (0.975, 4, 2.7764),
        (0.995, 10, 3.1693),
        (0.975, 1000, 1.9623),
    ],
)
def test_t_quantile_matches_tables(p: float, df: float, expected: float) -> None:
    assert stats.t_quantile(p, df) == pytest.approx(expected, abs=1e-3)


def test_t_interval_of_known_sample() -> None:
    ci = stats.t_interval([10.0, 12.0, 11.0, 13.0, 9.0])
    assert ci.estimate == 11.0
    assert (ci.low, ci.high) == pytest.approx((9.0368, 12.9632), abs=1e-3)


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    values = [float(x % 7) for x in range(50)]
    a = stats.bootstrap_interval(values, seed=0)
    b = stats.bootstrap_interval(values, seed=0)
    assert a == b
    assert a.low < stats.mean(values) < a.high


def test_ratio_verdicts() -> None:
    faster = stats.ratio_interval([112.0, 113.0, 114.0], [100.0, 101.0, 99.0])
    assert faster.verdict == "A>B"
    assert faster.low > 1.0
    same = stats.ratio_interval([100.0, 104.0, 96.0], [101.0, 97.0, 103.0])
    assert same.verdict == "not significant"
    few = stats.ratio_interval([112.0], [100.0, 101.0])
    assert few.verdict == stats.INCONCLUSIVE
    noisy = stats.ratio_interval([1.0, 2.0], [0.1, 50.0])
    assert noisy.verdict == stats.INCONCLUSIVE


def test_median_of_even_sample() -> None:
    assert stats.median([4.0, 1.0, 3.0, 2.0]) == 2.5


def test_t_quantile_and_interval_match_scipy() -> None:
    from_scipy = scipy_stats.t.ppf(0.975, 7)
    assert stats.t_quantile(0.975, 7) == pytest.approx(from_scipy, rel=1e-12)
    values = [3.1, 2.9, 3.4, 3.0, 2.7, 3.3]
    ci = stats.t_interval(values)
    low, high = scipy_stats.t.interval(
        0.95, len(values) - 1, loc=np.mean(values), scale=scipy_stats.sem(values)
    )
    assert (ci.low, ci.high) == pytest.approx((low, high), rel=1e-12)


def test_welch_difference_matches_scipy_ttest() -> None:
    a, b = [1000.0, 1010.0, 1003.0], [970.0, 981.0, 975.0, 990.0]
    diff = stats.welch_difference(a, b, confidence=0.90)
    ref = scipy_stats.ttest_ind(b, a, equal_var=False, alternative="less")
    assert diff.p_less == pytest.approx(ref.pvalue, rel=1e-9)
    two = scipy_stats.ttest_ind(b, a, equal_var=False).confidence_interval(0.90)
    assert (diff.low, diff.high) == pytest.approx((two.low, two.high), rel=1e-9)
    assert diff.estimate == pytest.approx(np.mean(b) - np.mean(a))
    assert not stats.welch_difference([1.0], [2.0, 3.0]).conclusive
    assert not stats.welch_difference([1.0, 1.0], [2.0, 2.0]).conclusive


def test_fieller_matches_published_example() -> None:
    """Fieller's interval solves (a − ρb)² = t² (va + ρ² vb): check the bounds are its roots."""
    a, b = [112.0, 113.0, 114.0, 111.5], [100.0, 101.0, 99.0, 100.5]
    ci = stats.ratio_interval(a, b)
    va, vb = np.var(a, ddof=1) / 4, np.var(b, ddof=1) / 4
    df = (va + vb) ** 2 / (va**2 / 3 + vb**2 / 3)
    t = scipy_stats.t.ppf(0.975, df)
    for rho in (ci.low, ci.high):
        assert (np.mean(a) - rho * np.mean(b)) ** 2 == pytest.approx(
            t * t * (va + rho * rho * vb), rel=1e-9
        )


def test_bootstrap_matches_scipy_percentile_bootstrap() -> None:
    values = [1.0, 2.5, 2.0, 3.5, 2.2, 1.7, 2.9]
    ours = stats.bootstrap_interval(values, seed=3, resamples=999)
    ref = scipy_stats.bootstrap(
        (np.asarray(values),),
        np.mean,
        n_resamples=999,
        method="percentile",
        rng=np.random.default_rng(3),
    )
    assert (ours.low, ours.high) == pytest.approx(
        (ref.confidence_interval.low, ref.confidence_interval.high), rel=1e-9
    )
    assert not stats.bootstrap_interval([2.0, 2.0, 2.0], seed=0).conclusive
