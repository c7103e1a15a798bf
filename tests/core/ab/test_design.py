"""A/B design: counterbalanced order, planning by power (against scipy's noncentral t and a
published sample size), and the cost against the fixed design."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from servelab.core.ab.design import (
    Noise,
    VisitCost,
    fixed_design,
    pooled_log_noise,
    pooled_log_ratio_sd,
    round_order,
    rounds_for_equivalence,
    rounds_for_power,
    sequential_rounds_for_power,
    spent,
    visit_plan,
)


def test_abba_alternates_and_random_is_seeded() -> None:
    assert [arm for _, arm in visit_plan(2, "abba")] == [
        "baseline",
        "candidate",
        "candidate",
        "baseline",
    ]
    a, b = round_order(20, "random", 5), round_order(20, "random", 5)
    assert a == b and len(set(a)) == 2
    assert round_order(20, "random", 6) != a
    with pytest.raises(ValueError, match="unknown order"):
        round_order(1, "aabb")


def test_pooled_noise_of_log_throughput() -> None:
    noise = pooled_log_noise(64, [[100.0, 102.0], [200.0, 196.0, 204.0], [300.0]])
    logs = [[math.log(100), math.log(102)], [math.log(v) for v in (200, 196, 204)]]
    ss = sum(sum((x - sum(g) / len(g)) ** 2 for x in g) for g in logs)
    assert (noise.df, noise.groups) == (3, 2)
    assert noise.sd_log == pytest.approx(math.sqrt(ss / 3))
    assert noise.sd_log_ratio == pytest.approx(math.sqrt(2) * noise.sd_log)
    assert math.isnan(pooled_log_noise(64, [[1.0]]).sd_log)


def test_rounds_for_power_matches_the_published_paired_t_sample_size() -> None:
    """A standardized effect of 0.5 at two-sided α 0.05 and 80% power needs n = 34 pairs
    (Cohen 1988, Table 2.4.1; G*Power gives 34 too)."""
    sd = 0.02
    noise = Noise(64, sd / math.sqrt(2), 10, 3)
    plan = rounds_for_power(noise, effect=math.expm1(0.5 * sd), power=0.8)
    assert plan.rounds == 34
    assert 0.8 <= plan.achieved_power < 0.82
    assert rounds_for_power(Noise(64, math.nan, 0, 0), effect=0.05).rounds is None


def test_sequential_plan_is_seeded_and_needs_more_rounds_for_smaller_effects() -> None:
    noise = Noise(64, 0.01, 10, 3)
    big = sequential_rounds_for_power(noise, effect=0.128, sims=300, seed=1)
    small = sequential_rounds_for_power(noise, effect=0.03, sims=300, seed=1)
    assert big == sequential_rounds_for_power(noise, effect=0.128, sims=300, seed=1)
    assert big.rounds == 3 and small.rounds is not None and small.rounds > big.rounds


def test_cost_of_the_visits_and_of_the_fixed_design() -> None:
    costs = [VisitCost(30.0, {64: 20.0, 80: 25.0}), VisitCost(30.0, {64: 20.0})]
    assert spent(costs, 1, 8).minutes == pytest.approx(125 / 60)
    assert spent(costs, 1, 8).gpu_minutes == pytest.approx(8 * 125 / 60)
    fixed = fixed_design(costs, 5, (64, 80), 8)
    assert (fixed.rounds, fixed.visits, fixed.estimated) == (5, 10, True)
    assert fixed.minutes == pytest.approx(10 * (30 + 20 + 25) / 60)


def test_equivalence_rounds_match_a_seeded_simulation_of_the_tost_interval() -> None:
    """The exact TOST power (normal mean, chi-square variance) against 20000 simulated fixed
    designs: the share whose 95% paired t interval lies inside ±ln(1.03)."""
    sd, margin = 0.015, 0.03
    noise = Noise(80, sd / math.sqrt(2), 10, 3)
    plan = rounds_for_equivalence(noise, margin=margin, power=0.8)
    assert plan.rounds is not None and plan.achieved_power >= 0.8
    n = plan.rounds
    x = np.random.default_rng(5).normal(0.0, sd, size=(20000, n))
    half = scipy_stats.t.ppf(0.975, n - 1) * x.std(axis=1, ddof=1) / math.sqrt(n)
    inside = np.abs(x.mean(axis=1)) + half < math.log1p(margin)
    assert inside.mean() == pytest.approx(plan.achieved_power, abs=0.01)
    shorter = rounds_for_equivalence(noise, margin=margin, power=0.8, max_rounds=n - 1)
    assert shorter.rounds is None and shorter.achieved_power < 0.8
    # a true change near the margin needs more rounds; no margin, no plan
    near = rounds_for_equivalence(noise, margin=margin, true_effect=0.01)
    assert near.rounds is not None and near.rounds > n
    assert rounds_for_equivalence(noise, margin=0.0).rounds is None


def test_the_per_round_log_ratio_sd_is_measured_when_rounds_were_recorded() -> None:
    sd, df = pooled_log_ratio_sd([[0.10, 0.12, 0.14], [0.0, 0.02], [0.5]])
    assert df == 3 and sd == pytest.approx(math.sqrt((0.02**2 * 2 + 0.01**2 * 2) / 3))
    assert pooled_log_ratio_sd([[0.1]]) == (pytest.approx(math.nan, nan_ok=True), 0)
    bound = Noise(64, 0.02, 6, 3)
    assert bound.sd_log_ratio == pytest.approx(math.sqrt(2) * 0.02)
    assert Noise(64, 0.02, 6, 3, paired_sd=0.01, paired_df=2).sd_log_ratio == 0.01
    assert Noise(64, 0.02, 6, 3, paired_sd=0.01, paired_df=1).sd_log_ratio == bound.sd_log_ratio


def test_a_large_effect_against_small_noise_needs_few_rounds() -> None:
    """+12.8% against a 1% SD per round: the noncentral t's lower tail is ~0, not nan (scipy's
    nct.cdf far below a large noncentrality), so 2 rounds already have the power."""
    plan = rounds_for_power(Noise(64, 0.01 / math.sqrt(2), 10, 3), effect=0.128)
    assert plan.rounds == 2 and 0.8 <= plan.achieved_power < 0.9
