"""The rule of ``servelab tune``: the counterbalanced block order, eliminations and stops on
hand-made blocks, the ranking's claims and what a truth contradicts in them, resume through the
codec (the error rates by simulation: test_tunecheck.py)."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping

import pytest

from servelab.core.ab.design import round_order
from servelab.core.ab.tune import (
    ArmStatus,
    Comparison,
    TuneOutcome,
    TuneRule,
    TuneState,
    block_order,
    compare,
    record_block,
    start_tune,
    tune_result,
    visit_order,
    williams_rows,
)
from servelab.core.ab.tunecheck import Misclaim, misclaims, simulate_tune
from servelab.core.ledger.codec import decode, encode

ARMS = ("128", "256", "384", "512", "768")


@pytest.mark.parametrize("n", range(1, 8))
def test_a_williams_square_balances_positions_and_what_follows_what(n: int) -> None:
    rows = williams_rows(n)
    assert len(rows) == (2 * n if n % 2 else n)
    assert all(sorted(row) == list(range(n)) for row in rows)
    per_position = len(rows) // n
    for pos in range(n):
        assert Counter(row[pos] for row in rows) == dict.fromkeys(range(n), per_position)
    follows = Counter((row[i], row[i + 1]) for row in rows for i in range(n - 1))
    pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
    assert all(follows[p] == (2 if n % 2 else 1) for p in pairs)
    assert sum(follows.values()) == len(pairs) * (2 if n % 2 else 1)


def test_two_arms_alternate_as_the_ab_does() -> None:
    orders = [visit_order(("a", "b"), block, scheme="williams", seed=3) for block in (1, 2, 3, 4)]
    first = orders[0][0]
    pattern = ["baseline" if o[0] == first else "candidate" for o in orders]
    assert pattern == [pair[0] for pair in round_order(4, "abba")]


def test_orders_are_seeded_and_the_square_restarts_when_an_arm_leaves() -> None:
    a = [visit_order(ARMS, b, scheme="williams", seed=1) for b in range(1, 11)]
    assert a == [visit_order(ARMS, b, scheme="williams", seed=1) for b in range(1, 11)]
    assert a != [visit_order(ARMS, b, scheme="williams", seed=2) for b in range(1, 11)]
    assert len(set(a)) == 10 and a[0] == visit_order(ARMS, 11, scheme="williams", seed=1)
    r = [visit_order(ARMS, b, scheme="random", seed=1) for b in range(1, 6)]
    assert r == [visit_order(ARMS, b, scheme="random", seed=1) for b in range(1, 6)]
    assert all(sorted(o) == sorted(ARMS) for o in r)
    with pytest.raises(ValueError, match="unknown order"):
        visit_order(ARMS, 1, scheme="abab", seed=0)
    state = _run({"a": 1.5, "b": 1.0, "c": 1.49}, blocks=3, rule=TuneRule(margin=0.0))
    assert [e.arm for e in state.eliminations] == ["b"] and state.eliminations[0].block == 3
    assert block_order(state) == visit_order(("a", "c"), 1, scheme="williams", seed=0)


def test_bad_rules_states_and_blocks_are_refused() -> None:
    for bad in ({"alpha": 0.0}, {"margin": -0.01}, {"max_rounds": 2}, {"boundary": "obf"},
                {"order": "abba"}):  # fmt: skip
        with pytest.raises(ValueError):
            TuneRule(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="two or more distinct"):
        start_tune(["a"], TuneRule())
    with pytest.raises(ValueError, match="two or more distinct"):
        start_tune(["a", "a"], TuneRule())
    state = start_tune(["a", "b"], TuneRule())
    with pytest.raises(ValueError, match="positive value for each"):
        record_block(state, {"a": 1.0})
    with pytest.raises(ValueError, match="positive value for each"):
        record_block(state, {"a": 1.0, "b": 0.0})


# -- hand-made blocks: a small wobble around fixed levels -------------------------------------

WOBBLE = (0.0, 0.004, -0.003, 0.002, -0.004, 0.003, -0.002, 0.001, -0.001, 0.0)


def _run(levels: Mapping[str, float], blocks: int, rule: TuneRule | None = None) -> TuneState:
    """``blocks`` blocks (or until done) where arm i's value is its level times a wobble."""
    state = start_tune(tuple(levels), rule or TuneRule())
    for b in range(blocks):
        if state.done:
            break
        state = record_block(state, {
            a: levels[a] * math.exp(WOBBLE[(b + 3 * i) % len(WOBBLE)] + 0.01 * b)
            for i, a in enumerate(state.survivors)
        })  # fmt: skip
    return state


def test_clearly_worse_arms_are_dropped_against_the_leader_and_the_last_one_is_best() -> None:
    levels = {"256": 1000.0, "384": 1100.0, "512": 1128.0, "768": 950.0}
    state = _run(levels, blocks=20, rule=TuneRule(margin=0.0))
    assert state.outcome is TuneOutcome.BEST and state.survivors == ("512",)
    first = state.eliminations[0]
    assert first.block == 3  # the first look
    assert {e.arm for e in state.eliminations if e.block == 3} == {"256", "768"}
    assert all(e.lost_to == "512" and e.comparison.high < 0 for e in state.eliminations)
    result = tune_result(state)
    assert result.winner == "512" and result.ranking[0].arm == "512"
    assert result.ranking[0].rank == 1 and result.ranking[0].status is ArmStatus.LEADER
    assert set(result.ranking[0].better_than) == {"256", "384", "768"}
    # 384 was shown better than 768 (+16%) over their 3 common blocks, not than 256 (+10%)
    assert [(r.arm, r.rank) for r in result.ranking] == [("512", 1), ("384", 2), ("256", 2),
                                                         ("768", 3)]  # fmt: skip
    assert result.ranking[1].better_than == ("768",)
    dropped = {r.arm: r for r in result.ranking if r.status is ArmStatus.ELIMINATED}
    assert dropped["384"].elimination is not None and dropped["384"].visits > 3
    assert result.cost.blocks == state.blocks and result.cost.full_visits == 4 * 20
    assert result.cost.visits == sum(r.visits for r in result.ranking) < result.cost.full_visits


def test_arms_within_the_margin_are_equivalent_not_ranked() -> None:
    levels = {"384": 1000.0, "512": 1001.0, "640": 999.5}
    result = tune_result(_run(levels, blocks=20))
    assert result.outcome is TuneOutcome.WITHIN_MARGIN and result.winner == result.leader
    assert not result.eliminations
    assert all(r.rank == 1 and not r.better_than for r in result.ranking)
    assert {r.status for r in result.ranking} == {ArmStatus.LEADER, ArmStatus.EQUIVALENT}
    assert result.cost.visits < result.cost.full_visits


def test_without_a_margin_ties_run_to_the_budget_and_claim_no_winner() -> None:
    rule = TuneRule(margin=0.0, max_rounds=6)
    result = tune_result(_run({"a": 1000.0, "b": 1000.0}, blocks=50, rule=rule))
    assert result.outcome is TuneOutcome.BUDGET and result.winner is None
    assert result.cost.blocks == 6 and result.cost.visits == result.cost.full_visits == 12
    assert {r.status for r in result.ranking} == {ArmStatus.LEADER, ArmStatus.UNDECIDED}
    with pytest.raises(ValueError, match="done"):
        block_order(_run({"a": 1000.0, "b": 1000.0}, blocks=50, rule=rule))


def test_a_comparison_before_the_first_look_is_unbounded() -> None:
    state = _run({"a": 2.0, "b": 1.0}, blocks=2)
    c = compare(state, "b", "a")
    assert c.blocks == 2 and c.ratio == pytest.approx(0.5, rel=0.01)
    assert c.ratio_ci == (0.0, math.inf) and not state.done
    assert math.isnan(Comparison("x", "y", 0, math.nan, -math.inf, math.inf).ratio)


def test_a_stored_tune_resumes_with_the_same_order_and_result() -> None:
    """Stored after its first elimination (what ``--resume`` reads back: the state, whose
    intervals are all bounded), a tune goes on exactly as if it had not stopped."""
    means = dict.fromkeys(ARMS, 0.0) | {"512": 0.12}
    done = simulate_tune(means, 0.03, TuneRule(), seed=5)
    assert done.done and done.eliminations
    cut = done.eliminations[0].block
    state = start_tune(ARMS, TuneRule())
    for b in range(cut):
        state = record_block(state, {a: done.values[a][b] for a in state.survivors})
    assert state.eliminations
    again = decode(TuneState, json.dumps(encode(state)))
    assert again == state and block_order(again) == block_order(state)
    assert type(again.eliminations[0].comparison) is Comparison
    for b in range(cut, done.blocks):
        again = record_block(again, {a: done.values[a][b] for a in again.survivors})
    assert again == done and tune_result(again) == tune_result(done)


def test_misclaims_name_what_the_truth_contradicts() -> None:
    levels = {"256": 1000.0, "384": 1100.0, "512": 1128.0, "768": 950.0}
    result = tune_result(_run(levels, blocks=20, rule=TuneRule(margin=0.0)))
    truth = {a: math.log(v) for a, v in levels.items()}
    assert misclaims(result, truth) == frozenset()
    upside_down = {a: -v for a, v in truth.items()}
    assert misclaims(result, upside_down) == {Misclaim.DROPPED_BEST, Misclaim.WRONG_WINNER,
                                              Misclaim.ANY_FALSE}  # fmt: skip
    flat = dict.fromkeys(levels, 0.0)
    assert misclaims(result, flat) == {Misclaim.DROPPED_BEST, Misclaim.TIED_RANKED,
                                       Misclaim.ANY_FALSE}  # fmt: skip
    equivalent = tune_result(_run({"a": 1000.0, "b": 1001.0}, blocks=20))
    assert equivalent.ranking[1].status is ArmStatus.EQUIVALENT
    assert equivalent.winner == "b"
    a_best = {"a": 0.1, "b": 0.0}  # the winner 10% below the best
    assert misclaims(equivalent, a_best) == {Misclaim.WRONG_WINNER, Misclaim.ANY_FALSE}
    b_best = {"a": 0.0, "b": 0.06}  # the right winner, but "a" is not within 5% of it
    assert misclaims(equivalent, b_best) == {Misclaim.ANY_FALSE}
