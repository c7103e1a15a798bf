"""Named estimators: percentiles (type 7), t intervals, bootstrap, Fieller ratio verdicts."""

from __future__ import annotations

import math

import pytest

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
