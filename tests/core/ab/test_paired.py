"""The paired analysis: the t interval on the mean log ratio against scipy; the bootstrap beside."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from servelab.core.ab.paired import log_ratios, paired_ratio
from servelab.core.stats import INCONCLUSIVE


def test_paired_t_interval_matches_scipy_one_sample_t_on_log_ratios() -> None:
    base = [1000.0, 1012.0, 990.0, 1005.0]
    cand = [1130.0, 1139.0, 1118.0, 1131.0]
    p = paired_ratio(base, cand)
    d = np.log(np.asarray(cand) / np.asarray(base))
    ref = scipy_stats.ttest_1samp(d, 0.0).confidence_interval(0.95)
    assert p.n == 4 and p.verdict == "A>B"
    assert p.ratio == pytest.approx(math.exp(d.mean()), rel=1e-12)
    assert p.ci == pytest.approx((math.exp(ref.low), math.exp(ref.high)), rel=1e-12)
    assert "n=4 rounds" in p.method
    # the same rounds through scipy's paired test: t of ttest_rel on logs
    assert scipy_stats.ttest_rel(np.log(cand), np.log(base)).pvalue < 0.05


def test_small_n_gets_a_bootstrap_beside_the_t_interval() -> None:
    p = paired_ratio([100.0, 102.0, 99.0], [104.0, 103.0, 105.0], seed=1)
    assert p.bootstrap_ci is not None
    assert "not used for the verdict" in p.bootstrap_method
    # at n=3 the percentile bootstrap is narrower than the t interval (why it does not decide)
    assert p.ci[0] < p.bootstrap_ci[0] and p.bootstrap_ci[1] < p.ci[1]
    big = paired_ratio([100.0 + i % 3 for i in range(12)], [104.0 + i % 4 for i in range(12)])
    assert big.bootstrap_ci is None


def test_pairing_removes_shared_drift_the_unpaired_view_cannot() -> None:
    """A drift shared by both visits of a round: paired says +2%, significant."""
    drift = [1000.0, 1100.0, 1200.0, 1300.0]
    base, cand = drift, [v * 1.02 for v in drift]
    cand = [c * (1 + e) for c, e in zip(cand, (0.001, -0.001, 0.002, -0.002), strict=True)]
    assert paired_ratio(base, cand).verdict == "A>B"


def test_too_few_rounds_or_zero_variance_is_inconclusive() -> None:
    assert paired_ratio([100.0], [110.0]).verdict == INCONCLUSIVE
    assert paired_ratio([100.0, 200.0], [110.0, 220.0]).verdict == INCONCLUSIVE
    assert paired_ratio([0.0, 1.0], [1.0, 1.0]).reason == "a non-positive throughput"
    assert log_ratios([1.0, 2.0, 3.0], [2.0, 4.0]) == pytest.approx((math.log(2), math.log(2)))
