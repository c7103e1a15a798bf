"""The tune rule checked by simulation (pure, seeded): simulated tunes of a known truth, the
statements of a result that truth contradicts (:class:`Misclaim`), the bound the rule claims for
each (:func:`claimed_bounds`: a best arm dropped or a winner not within the margin needs a miss of
a pair with a best arm in it, at most ``2 alpha / K`` with one best arm), the truths it is checked
on (:class:`Scenario`) and their tally (:func:`check_rule`). The rule itself is
:mod:`servelab.core.ab.tune`; ``benchmarks/tune_rule.py`` prints these rates.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import assert_never

from servelab.core.ab.tune import (
    ArmStatus,
    TuneOutcome,
    TuneResult,
    TuneRule,
    TuneState,
    block_order,
    record_block,
    start_tune,
    tune_result,
)

__all__ = [
    "Misclaim",
    "RuleCheck",
    "Scenario",
    "check_rule",
    "claimed_bounds",
    "misclaims",
    "scenario_means",
    "simulate_tune",
]


def simulate_tune(means: Mapping[str, float], noise: float, rule: TuneRule, seed: int) -> TuneState:
    """A tune run to its end on simulated visits: arm ``a``'s value in a block is
    ``exp(means[a] + block effect + e)``, the block effect and every ``e`` drawn N(0, noise)
    from ``random.Random(seed)`` (``means`` on the log scale; 0.03 noise ≈ 3% per visit)."""
    rng = random.Random(seed)
    state = start_tune(tuple(means), rule)
    while not state.done:
        shared = rng.gauss(0.0, noise)
        order = block_order(state)
        state = record_block(
            state, {a: math.exp(means[a] + shared + rng.gauss(0.0, noise)) for a in order}
        )
    return state


class Misclaim(StrEnum):
    """A statement of a result that the truth contradicts: an arm with the highest true mean
    dropped; a winner the margin or more below the best; two arms the truth ties shown one
    above the other; any statement false (those, an elimination, an order, an equivalence)."""

    DROPPED_BEST = "dropped_best"
    WRONG_WINNER = "wrong_winner"
    TIED_RANKED = "tied_ranked"
    ANY_FALSE = "any_false"


def misclaims(
    result: TuneResult, means: Mapping[str, float], tol: float = 1e-12
) -> frozenset[Misclaim]:
    """What the true mean logs ``means`` contradict in ``result`` (ties within ``tol``)."""
    best, bound = max(means.values()), result.rule.bound
    found = set()
    if any(means[e.arm] >= best - tol for e in result.eliminations):
        found.add(Misclaim.DROPPED_BEST)
    gap = best - means[result.winner] if result.winner is not None else 0.0
    if gap > tol and gap >= bound - tol:
        found.add(Misclaim.WRONG_WINNER)
    for r in result.ranking:
        for b in r.better_than:
            if abs(means[r.arm] - means[b]) <= tol:
                found.add(Misclaim.TIED_RANKED)
            if means[r.arm] <= means[b] + tol:
                found.add(Misclaim.ANY_FALSE)
        gap_to_leader = abs(means[r.arm] - means[result.leader])
        if r.status is ArmStatus.EQUIVALENT and gap_to_leader >= bound - tol:
            found.add(Misclaim.ANY_FALSE)
    if found or any(means[e.arm] >= means[e.lost_to] - tol for e in result.eliminations):
        found.add(Misclaim.ANY_FALSE)
    return frozenset(found)


def claimed_bounds(
    means: Mapping[str, float], alpha: float, tol: float = 1e-12
) -> dict[Misclaim, float]:
    """What the rule claims of each misclaim's probability for arms of true mean logs ``means``.
    A best arm dropped or a winner not within the margin needs a miss of a pair with a best arm
    in it: ``alpha`` × the share of such pairs (``2 alpha / K`` with one best arm, ``alpha``
    when all tie); any false statement, ties ranked included, needs a miss of some pair:
    ``alpha``."""
    k, best = len(means), max(means.values())
    rest = sum(1 for v in means.values() if v < best - tol)
    pairs = k * (k - 1) // 2
    on_best = alpha * (pairs - rest * (rest - 1) // 2) / pairs
    return {Misclaim.DROPPED_BEST: on_best, Misclaim.WRONG_WINNER: on_best,
            Misclaim.TIED_RANKED: alpha, Misclaim.ANY_FALSE: alpha}  # fmt: skip


class Scenario(StrEnum):
    """The truths the rule is checked on."""

    ALL_EQUAL = "all_equal"
    ONE_BEST = "one_best_by_the_margin"  # the others exactly the margin below it
    CLOSE_SECOND = "close_second"  # one half the margin below the best, the rest twice it
    CLEAR_BEST = "clear_best"  # the others three margins below (+16% with a 5% margin)


def scenario_means(scenario: Scenario, arms: Sequence[str], margin: float) -> dict[str, float]:
    """The true mean logs of ``arms`` in ``scenario``: the best is ``arms[-2]`` (the CTAS list's
    512), the close second ``arms[-3]``."""
    bound, best = math.log1p(margin), arms[-2]
    match scenario:
        case Scenario.ALL_EQUAL:
            return dict.fromkeys(arms, 0.0)
        case Scenario.ONE_BEST:
            return dict.fromkeys(arms, -bound) | {best: 0.0}
        case Scenario.CLOSE_SECOND:
            return dict.fromkeys(arms, -2 * bound) | {best: 0.0, arms[-3]: -bound / 2}
        case Scenario.CLEAR_BEST:
            return dict.fromkeys(arms, -3 * bound) | {best: 0.0}
        case _:
            assert_never(scenario)


@dataclass(frozen=True, slots=True)
class RuleCheck:
    """``runs`` simulated tunes of one truth: how many made each misclaim and the bound the rule
    claims for it, how they stopped, and the mean blocks and visits against the full design."""

    runs: int
    errors: Mapping[Misclaim, int]
    bounds: Mapping[Misclaim, float]
    outcomes: Mapping[TuneOutcome, int]
    mean_blocks: float
    mean_visits: float
    full_visits: int


def check_rule(
    means: Mapping[str, float], noise: float, rule: TuneRule, runs: int, seed: int = 0
) -> RuleCheck:
    """Simulate ``runs`` tunes (seeds ``seed`` .. ``seed + runs − 1``) and tally them."""
    errors = dict.fromkeys(Misclaim, 0)
    outcomes = dict.fromkeys(TuneOutcome, 0)
    blocks = visits = 0
    for s in range(seed, seed + runs):
        result = tune_result(simulate_tune(means, noise, rule, s))
        for wrong in misclaims(result, means):
            errors[wrong] += 1
        outcomes[result.outcome] += 1
        blocks += result.cost.blocks
        visits += result.cost.visits
    full = len(means) * rule.max_rounds
    return RuleCheck(runs, errors, claimed_bounds(means, rule.alpha), outcomes, blocks / runs,
                     visits / runs, full)  # fmt: skip
