"""A tune's record: the grid of arms, the levels replayed from the visits (one level exactly the
rule's own blocks), the block a resumed tune runs next, the arm the levels agree on, the cost,
and the record through the codec."""

from __future__ import annotations

import json
import math
import random

import pytest

from servelab.core.ab.result import ArmVisit
from servelab.core.ab.tune import (
    ArmStatus,
    Comparison,
    RankedArm,
    TuneCost,
    TuneOutcome,
    TuneResult,
    TuneRule,
    block_order,
    record_block,
    start_tune,
    tune_result,
)
from servelab.core.ab.tunerun import (
    LevelTune,
    TuneArm,
    TuneKnob,
    TuneMetric,
    TuneRecord,
    agreed_best,
    conclude_tune,
    grid,
    level_rule,
    next_block,
    objective_value,
    replay,
)
from servelab.core.ledger.codec import decode, encode

CTAS = TuneKnob("decode", "SGLANG_SM120_MMA_TARGET_CTAS", ("256", "512", "768"))
#: True mean tok/s per arm and level: at C64 512 is far ahead, at C96 768 is.
MEANS = {64: {"256": 1000.0, "512": 1300.0, "768": 1250.0},
         96: {"256": 1100.0, "512": 1200.0, "768": 1500.0}}  # fmt: skip


def test_the_grid_is_every_combination_named_by_value_or_knob() -> None:
    assert grid([CTAS]) == tuple(TuneArm(v, (v,)) for v in CTAS.values)
    cap = TuneKnob("decode", "--max-running-requests", ("32", "64"))
    arms = grid([CTAS, cap])
    assert len(arms) == 6 and arms[0].values == ("256", "32") and arms[1].values == ("256", "64")
    assert arms[0].label == "SGLANG_SM120_MMA_TARGET_CTAS=256, --max-running-requests=32"


def _visit(arm: str, block: int, values: dict[int, float], position: int) -> ArmVisit:
    return ArmVisit(
        arm, block - 1, None, arm, values, 0, (), position, "", 1.0, {c: 2.0 for c in values}
    )


def _simulate(levels: tuple[int, ...], rule: TuneRule, seed: int) -> list[ArmVisit]:
    """Visits as the ops loop makes them: the next block's order and levels from the replay,
    each arm's value its true mean times a shared block effect and its own noise."""
    rng, visits = random.Random(seed), []
    labels = tuple(a.label for a in grid([CTAS]))
    while (block := replay(labels, rule, levels, TuneMetric.THROUGHPUT, visits)[1]) is not None:
        shared = rng.gauss(0.0, 0.02)
        for arm in block.order:
            values = {c: MEANS[c][arm] * math.exp(shared + rng.gauss(0.0, 0.02))
                      for c in block.levels[arm]}  # fmt: skip
            visits.append(_visit(arm, block.block, values, len(visits)))
    return visits


def test_one_level_replays_exactly_the_rules_own_blocks() -> None:
    rule = TuneRule(max_rounds=8, seed=5)
    visits = _simulate((64,), rule, seed=1)
    labels = tuple(a.label for a in grid([CTAS]))
    state = start_tune(labels, rule)
    for block in range(1, max(v.round for v in visits) + 2):
        mine = [v for v in visits if v.round == block - 1]
        assert tuple(v.arm for v in mine) == block_order(state)
        state = record_block(state, {v.arm: v.throughput[64] for v in mine})
    states, after = replay(labels, rule, (64,), TuneMetric.THROUGHPUT, visits)
    assert after is None and states[64] == state and state.done
    assert tune_result(state).winner == "512"


def test_several_levels_visit_each_arm_where_it_still_runs() -> None:
    rule = TuneRule(max_rounds=10, seed=2)
    visits = _simulate((64, 96), rule, seed=3)
    states, _ = replay(tuple(MEANS[64]), rule, (64, 96), TuneMetric.THROUGHPUT, visits)
    assert all(s.rule == level_rule(rule, 2) and s.rule.alpha == 0.025 for s in states.values())
    for level, state in states.items():
        for arm in state.arms:
            assert len(state.values[arm]) == sum(1 for v in visits if level in v.throughput
                                                  and v.arm == arm)  # fmt: skip
    dropped = {(lvl, e.arm): e.block for lvl, s in states.items() for e in s.eliminations}
    assert (64, "256") in dropped and (96, "256") in dropped
    gone = max(dropped[64, "256"], dropped[96, "256"])
    assert all(v.arm != "256" for v in visits if v.round >= gone)  # out of the running at both
    record = conclude_tune(TuneRecord((CTAS,), grid([CTAS]), TuneMetric.THROUGHPUT, (64, 96),
                                      rule, visits=tuple(visits)))  # fmt: skip
    winners = {t.level: t.result.winner for t in record.tunes}
    assert winners[96] == "768" and winners[64] in ("512", None)
    assert record.cost is not None and record.cost.visits == len(visits)
    assert record.full_cost is not None and record.full_cost.visits == 3 * 10
    assert record.full_cost.minutes == pytest.approx(30 * (1.0 + 2 * 2.0) / 60)  # 1 s + 2 per C


def test_a_resumed_tune_runs_the_rest_of_its_block() -> None:
    rule = TuneRule(max_rounds=6)
    visits = _simulate((64,), rule, seed=4)
    cut = visits[:4]  # block 1 whole, block 2 begun
    record = TuneRecord((CTAS,), grid([CTAS]), TuneMetric.THROUGHPUT, (64,), rule,
                        visits=tuple(cut))  # fmt: skip
    block = next_block(record)
    assert block is not None and block.block == 2
    assert block.order[0] == cut[3].arm and [v.arm for v in visits[3:6]] == list(block.order)
    assert record.blocks == 2


def test_a_visit_without_the_metric_is_refused() -> None:
    visit = _visit("256", 1, {64: 0.0}, 0)
    assert objective_value(TuneMetric.THROUGHPUT, visit, 64) is None
    visits = [visit, _visit("512", 1, {64: 1.0}, 1), _visit("768", 1, {64: 1.0}, 2)]
    with pytest.raises(ValueError, match="no throughput at C64 for 256"):
        replay(("256", "512", "768"), TuneRule(), (64,), TuneMetric.THROUGHPUT, visits)


def test_goodput_and_capacity_are_read_where_an_ab_keeps_them() -> None:
    visit = _visit("256", 1, {64: 3.5, 0: 52.0}, 0)
    assert objective_value(TuneMetric.GOODPUT, visit, 64) == 3.5
    assert objective_value(TuneMetric.CAPACITY, visit, 0) == 52.0
    assert objective_value(TuneMetric.GOODPUT, _visit("256", 1, {64: 0.0}, 0), 64) is None


def _level(level: int, winner: str | None, equivalent: tuple[str, ...] = ()) -> LevelTune:
    arms = ("a", "b", "c")
    state = start_tune(arms, TuneRule())
    vs = Comparison("x", "y", 3, 0.0, -0.01, 0.01)
    ranking = tuple(RankedArm(a, 1, ArmStatus.LEADER if a == winner else ArmStatus.EQUIVALENT
                              if a in equivalent else ArmStatus.ELIMINATED, vs, (), 3)
                    for a in arms)  # fmt: skip
    outcome = TuneOutcome.WITHIN_MARGIN if winner else TuneOutcome.BUDGET
    result = TuneResult(outcome, winner, winner or "a", ranking, (), TuneCost(3, 9, 60), TuneRule())
    return LevelTune(level, state, result)


def test_the_best_arm_is_the_one_every_level_agrees_on() -> None:
    assert agreed_best([_level(64, "b"), _level(96, "b")]) == "b"
    assert agreed_best([_level(64, "b"), _level(96, "c", ("b",))]) == "b"
    assert agreed_best([_level(64, "b", ("c",)), _level(96, "c")]) == "c"
    assert agreed_best([_level(64, "b"), _level(96, "c")]) is None
    assert agreed_best([_level(64, "b"), _level(96, None)]) is None
    assert agreed_best([]) is None


def test_a_record_reads_back_through_the_codec() -> None:
    rule = TuneRule(max_rounds=6)
    record = conclude_tune(TuneRecord((CTAS,), grid([CTAS]), TuneMetric.THROUGHPUT, (64, 96),
                                      rule, visits=tuple(_simulate((64, 96), rule, seed=9)),
                                      original=("256",), tune_id=3))  # fmt: skip
    again = decode(TuneRecord, json.loads(json.dumps(encode(record))))
    assert again == record
