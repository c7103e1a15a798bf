"""The tune rule checked by simulation: the bounds it claims for each misclaim, and the
family-wise error rates by a small seeded simulation (the full check is
benchmarks/tune_rule.py)."""

from __future__ import annotations

import math

import pytest

from servelab.core.ab.tune import TuneOutcome, TuneRule
from servelab.core.ab.tunecheck import (
    Misclaim,
    Scenario,
    check_rule,
    claimed_bounds,
    scenario_means,
)

ARMS = ("128", "256", "384", "512", "768")


def test_the_claimed_bounds() -> None:
    def on_best(means: dict[str, float]) -> float:
        bounds = claimed_bounds(means, 0.05)
        assert bounds[Misclaim.TIED_RANKED] == bounds[Misclaim.ANY_FALSE] == 0.05
        assert bounds[Misclaim.DROPPED_BEST] == bounds[Misclaim.WRONG_WINNER]
        return bounds[Misclaim.DROPPED_BEST]

    assert on_best(scenario_means(Scenario.ALL_EQUAL, ARMS, 0.05)) == pytest.approx(0.05)
    assert on_best(scenario_means(Scenario.ONE_BEST, ARMS, 0.05)) == pytest.approx(2 * 0.05 / 5)
    two_best = dict.fromkeys(ARMS, 0.0) | {"384": 0.05, "512": 0.05}
    assert on_best(two_best) == pytest.approx(0.05 * 7 / 10)
    close = scenario_means(Scenario.CLOSE_SECOND, ARMS, 0.05)
    assert max(close, key=close.__getitem__) == "512" and close["384"] == -math.log1p(0.05) / 2


# -- the error rates, by a small seeded simulation --------------------------------------------

RUNS = 300


@pytest.mark.timeout(240)
@pytest.mark.parametrize("scenario", list(Scenario))
def test_the_error_rates_meet_the_claims(scenario: Scenario) -> None:
    """300 seeded tunes (5 arms, 3% noise per visit, the default rule): each misclaim's observed
    rate is at most its claimed bound plus 3 binomial standard errors of the simulation."""
    rule = TuneRule()
    check = check_rule(scenario_means(scenario, ARMS, rule.margin), 0.03, rule, RUNS)
    assert check.runs == RUNS and sum(check.outcomes.values()) == RUNS
    for wrong, bound in check.bounds.items():
        slack = 3 * math.sqrt(bound * (1 - bound) / RUNS)
        assert check.errors[wrong] / RUNS <= bound + slack, (wrong, check)
    assert check.outcomes[TuneOutcome.BUDGET] < RUNS / 2  # it mostly stops before its budget
    if scenario is Scenario.CLEAR_BEST:  # some stop with the others all dropped
        assert check.outcomes[TuneOutcome.BEST] > 0
    assert check.mean_visits < check.full_visits == len(ARMS) * rule.max_rounds
