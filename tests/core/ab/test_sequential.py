"""Lai's confidence sequence and Pocock's repeated intervals: the closed form, the decisions, and
each one's error rate under repeated looks by seeded, bounded simulation against the nominal
level."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as scipy_stats

from servelab.core.ab.sequential import (
    Boundary,
    Decision,
    confidence_sequence,
    cs_multiplier,
    decide,
    first_decision,
    looks_for,
    pocock_level,
    rci_multiplier,
)

BETTER, WORSE = Decision.BETTER, Decision.WORSE
EQUIVALENT, UNDECIDED = Decision.EQUIVALENT, Decision.UNDECIDED
ALPHA = 0.05
SIMS, LOOKS = 2000, 15


def _bayes_factor(t: float, n: int, g: float) -> float:
    nu, k = n - 1, 1 + n * g
    return float(k**-0.5 * ((1 + t * t / nu) / (1 + t * t / (nu * k))) ** (n / 2))


@pytest.mark.parametrize("n", [3, 4, 6, 10, 30])
def test_closed_form_is_where_the_mixture_bayes_factor_reaches_one_over_alpha(n: int) -> None:
    mult = cs_multiplier(n, alpha=ALPHA, mixture=20.0)
    root = optimize.brentq(lambda t: _bayes_factor(t, n, 20.0) - 1 / ALPHA, 0.0, 1e3)
    assert mult == pytest.approx(root, rel=1e-9)
    # wider than the fixed-n t interval at the same n: the price of looking after every round
    assert mult > scipy_stats.t.ppf(1 - ALPHA / 2, n - 1)


def test_unbounded_until_three_rounds() -> None:
    assert math.isinf(cs_multiplier(2))
    cs = confidence_sequence([0.1, 0.12])
    assert not cs.bounded and decide(cs, 0.01) == UNDECIDED
    assert confidence_sequence([0.1, 0.12, 0.11]).bounded


def test_decisions() -> None:
    assert decide(confidence_sequence([0.12, 0.125, 0.13, 0.12]), None) == BETTER
    assert decide(confidence_sequence([-0.12, -0.125, -0.13, -0.12]), None) == WORSE
    near_zero = [0.001, -0.001, 0.0005, -0.0005, 0.0002, 0.0]
    assert decide(confidence_sequence(near_zero), 0.01) == EQUIVALENT
    assert decide(confidence_sequence(near_zero), None) == UNDECIDED
    assert first_decision([0.12, 0.125, 0.13, 0.12], None) == (3, BETTER)


def _anytime_miss(rng: np.random.Generator, mu: float, sd: float) -> float:
    misses = 0
    for row in rng.normal(mu, sd, size=(SIMS, LOOKS)):
        for n in range(2, LOOKS + 1):
            cs = confidence_sequence([float(x) for x in row[:n]], alpha=ALPHA)
            if not cs.low < mu < cs.high:
                misses += 1
                break
    return misses / SIMS


@pytest.mark.timeout(120)
def test_error_rate_under_repeated_looks_stays_at_the_nominal_level() -> None:
    """2000 seeded A/Bs looked at after every round up to 15: the sequence misses the true mean
    at ANY look at most alpha of the time (plus 3 binomial standard errors of Monte Carlo)."""
    slack = 3 * math.sqrt(ALPHA * (1 - ALPHA) / SIMS)
    for mu, sd in ((0.0, 0.02), (0.05, 0.01)):
        assert _anytime_miss(np.random.default_rng(7), mu, sd) <= ALPHA + slack


@pytest.mark.timeout(120)
def test_the_stopping_rule_rarely_calls_a_null_effect_or_a_real_one_equivalent() -> None:
    rng = np.random.default_rng(11)
    null = [
        first_decision([float(x) for x in row], 0.01)[1]
        for row in rng.normal(0, 0.02, (SIMS, LOOKS))
    ]
    wrong = sum(d in (BETTER, WORSE) for d in null) / SIMS
    assert wrong <= ALPHA
    # a true +3% change with a 1% margin is almost never called equivalent
    real = [first_decision([float(x) for x in row], 0.01)[1]
            for row in rng.normal(math.log(1.03), 0.02, (SIMS, LOOKS))]  # fmt: skip
    assert sum(d == EQUIVALENT for d in real) / SIMS <= ALPHA


def test_a_fixed_n_t_interval_checked_every_round_does_not_keep_its_level() -> None:
    """Why a sequential method: the naive rule (stop at the first 95% t interval excluding 0)."""
    x = np.random.default_rng(3).normal(0.0, 1.0, size=(SIMS, LOOKS))
    hit = np.zeros(SIMS, dtype=bool)
    for n in range(3, LOOKS + 1):
        m, s = x[:, :n].mean(axis=1), x[:, :n].std(axis=1, ddof=1)
        hit |= np.abs(m) > scipy_stats.t.ppf(1 - ALPHA / 2, n - 1) * s / math.sqrt(n)
    assert hit.mean() > 2 * ALPHA


# -- Pocock repeated confidence intervals (the default boundary of ab --until-decided) --------

POCOCK_LOOKS = 8


def test_pocock_boundary_is_narrower_than_lai_at_every_look_and_bounded_to_its_looks() -> None:
    level = pocock_level(POCOCK_LOOKS, ALPHA)
    assert ALPHA / POCOCK_LOOKS < level < ALPHA  # between Bonferroni and no correction
    assert pocock_level(POCOCK_LOOKS, ALPHA) == level  # seeded: the same every time
    for n in range(3, POCOCK_LOOKS + 1):
        rci = rci_multiplier(n, POCOCK_LOOKS)
        assert scipy_stats.t.ppf(1 - ALPHA / 2, n - 1) < rci < cs_multiplier(n)
    assert math.isinf(rci_multiplier(2, POCOCK_LOOKS))
    assert math.isinf(rci_multiplier(POCOCK_LOOKS + 1, POCOCK_LOOKS))
    assert looks_for(Boundary.POCOCK, 8) == 8 and looks_for(Boundary.LAI, 8) is None
    cs = confidence_sequence([0.1, 0.12, 0.11], looks=POCOCK_LOOKS)
    assert cs.bounded and cs.looks == POCOCK_LOOKS and "Pocock" in cs.method


def _pocock_miss(rng: np.random.Generator, mu: float, sd: float) -> float:
    misses = 0
    for row in rng.normal(mu, sd, size=(SIMS, POCOCK_LOOKS)):
        for n in range(2, POCOCK_LOOKS + 1):
            cs = confidence_sequence([float(x) for x in row[:n]], looks=POCOCK_LOOKS)
            if not cs.low < mu < cs.high:
                misses += 1
                break
    return misses / SIMS


@pytest.mark.timeout(120)
def test_pocock_error_rate_over_its_looks_stays_at_the_nominal_level() -> None:
    """2000 seeded A/Bs (a seed other than the boundary's own) looked at after every round up to
    its 8 looks: the repeated interval misses the true mean at ANY look at most alpha of the
    time (plus 3 binomial standard errors), and not far below it (the boundary is not wasted)."""
    slack = 3 * math.sqrt(ALPHA * (1 - ALPHA) / SIMS)
    for mu, sd in ((0.0, 0.02), (0.05, 0.01)):
        miss = _pocock_miss(np.random.default_rng(17), mu, sd)
        assert ALPHA - 2 * slack <= miss <= ALPHA + slack


@pytest.mark.timeout(120)
def test_pocock_stopping_rule_rarely_calls_a_null_effect_or_a_real_one_equivalent() -> None:
    rng = np.random.default_rng(23)
    null = [
        first_decision([float(x) for x in row], 0.01, looks=POCOCK_LOOKS)[1]
        for row in rng.normal(0, 0.02, (SIMS, POCOCK_LOOKS))
    ]
    assert sum(d in (BETTER, WORSE) for d in null) / SIMS <= ALPHA
    real = [first_decision([float(x) for x in row], 0.01, looks=POCOCK_LOOKS)[1]
            for row in rng.normal(math.log(1.03), 0.02, (SIMS, POCOCK_LOOKS))]  # fmt: skip
    assert sum(d == EQUIVALENT for d in real) / SIMS <= ALPHA
    # and it decides a clear +12.8% (SD 2% a round) by round 3 more often than Lai's sequence
    clear = rng.normal(math.log(1.128), 0.02, (SIMS, POCOCK_LOOKS))
    by3 = [
        first_decision([float(x) for x in row[:3]], None, looks=POCOCK_LOOKS)[0] for row in clear
    ]
    lai3 = [first_decision([float(x) for x in row[:3]], None)[0] for row in clear]
    assert sum(n is not None for n in by3) > sum(n is not None for n in lai3)
