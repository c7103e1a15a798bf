"""The answers rule: exact McNemar and Newcombe's paired interval (checked against scipy and the
unpaired interval they reduce to), its outcomes, and its false alarms by a small simulation (the
full check is benchmarks/answers_rule.py)."""

from __future__ import annotations

import math

import pytest
from scipy import stats as scipy_stats

from servelab.core.answers.rule import AnswersOutcome, decide_answers, pairs
from servelab.core.answers.simulate import simulate_rule
from servelab.core.case.experiment import ArmTally, newcombe_interval
from servelab.core.stats import mcnemar_exact_p, newcombe_paired_interval


@pytest.mark.parametrize(("f", "g"), [(0, 0), (1, 0), (6, 0), (7, 3), (10, 12), (0, 25)])
def test_mcnemar_is_the_two_sided_binomial_test(f: int, g: int) -> None:
    expected = 1.0 if f + g == 0 else scipy_stats.binomtest(f, f + g, 0.5).pvalue
    assert mcnemar_exact_p(f, g) == pytest.approx(expected)


def test_newcombe_paired_reduces_to_the_unpaired_when_phi_is_zero() -> None:
    # e*h == f*g: no correlation between the two sides, so the paired interval is the unpaired.
    paired = newcombe_paired_interval(2, 4, 3, 6)
    lo, hi = newcombe_interval(ArmTally("a", None, 15, 6), ArmTally("b", None, 15, 5))
    assert paired.estimate == pytest.approx(1 / 15)
    assert (paired.low, paired.high) == (pytest.approx(lo), pytest.approx(hi))


def test_newcombe_paired_is_narrower_with_agreement_and_behaves_at_zero() -> None:
    agreeing = newcombe_paired_interval(10, 2, 0, 18)
    independent = newcombe_interval(ArmTally("a", None, 30, 12), ArmTally("b", None, 30, 10))
    assert agreeing.high - agreeing.low < independent[1] - independent[0]
    zero = newcombe_paired_interval(0, 0, 0, 30)
    assert zero.estimate == 0 and zero.low < 0 < zero.high and zero.high < 0.15
    assert math.isnan(newcombe_paired_interval(0, 0, 0, 0).estimate)


def test_the_outcomes() -> None:
    changed = decide_answers([(True, False)] * 10 + [(False, False)] * 20)
    assert changed.outcome is AnswersOutcome.CHANGED and changed.low > 0 and changed.p < 0.05
    assert changed.changes and (changed.candidate_wrong, changed.baseline_wrong) == (10, 0)
    fewer = decide_answers([(False, True)] * 10 + [(False, False)] * 20)
    assert fewer.outcome is AnswersOutcome.FEWER and fewer.high < 0
    same = decide_answers([(True, True)] * 5 + [(False, False)] * 25)
    assert same.outcome is AnswersOutcome.UNCHANGED and same.p == 1.0
    few = decide_answers([(True, False)] * 2 + [(False, False)] * 8)
    assert few.outcome is AnswersOutcome.INCONCLUSIVE  # fewer pairs than "unchanged" needs
    assert not few.changes and few.p >= 0.05


def test_a_significant_change_stands_with_few_pairs() -> None:
    # 8 of 18 wrong against none (the ninth hostile pass): p = 0.0078 is no "too few to say";
    # a gate that read it as inconclusive kept a faster setting that broke one answer in two
    lopsided = decide_answers([(True, False)] * 8 + [(False, False)] * 10)
    assert lopsided.outcome is AnswersOutcome.CHANGED and lopsided.changes
    assert lopsided.p < 0.01 and lopsided.low > 0 and lopsided.n < lopsided.min_pairs
    assert decide_answers([(True, False)] * 10).outcome is AnswersOutcome.CHANGED
    better = decide_answers([(False, True)] * 8 + [(False, False)] * 10)
    assert better.outcome is AnswersOutcome.FEWER


def test_pairs_are_matched_by_round_level_and_probe() -> None:
    base = {(0, 64, 1): False, (0, 64, 2): True, (1, 64, 1): False}
    cand = {(0, 64, 1): True, (0, 64, 2): True, (2, 64, 1): True}
    assert pairs(base, cand) == [(True, False), (True, True)]


def test_false_alarms_stay_within_alpha_under_batch_nondeterminism() -> None:
    for rate in (0.005, 0.02):
        sim = simulate_rule(runs=300, pairs=60, rate=rate, seed=7)
        assert sim.share(AnswersOutcome.CHANGED) <= 0.05
    garbled = simulate_rule(runs=100, pairs=60, rate=0.0, garble=1 / 3, seed=7)
    assert garbled.share(AnswersOutcome.CHANGED) > 0.9
