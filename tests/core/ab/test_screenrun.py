"""A tune's screening phase, decided from given visits: the runs visited in blocks of every run,
the phase stopped when every contrast is decided or at the block budget, the follow-up's arms,
a journal split back into the screening's visits and the tune's, and the record through the
codec (a tune without screening reads and writes as before)."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from servelab.core.ab.factorial import EffectEstimate, EffectStatus, FollowUp
from servelab.core.ab.result import ArmVisit
from servelab.core.ab.screenrun import (
    LevelEffects,
    Screening,
    merged_follow_up,
    screen_factors,
    screen_stopped,
)
from servelab.core.ab.tune import TuneRule
from servelab.core.ab.tunerun import (
    TuneKnob,
    TuneMetric,
    TuneRecord,
    conclude_tune,
    follow_up_arms,
    grid,
    next_block,
    screen,
    with_visits,
)
from servelab.core.bench.contract import BenchConfig
from servelab.core.ledger.codec import decode, encode
from servelab.ops.ab.tuneconfig import TuneConfig

CAP = TuneKnob("decode", "--max-running-requests", ("4", "64"))
REPORT = TuneKnob("decode", "--enable-cache-report", ("off", "on"))
NOOP = TuneKnob("decode", "SERVELAB_NOOP", ("a", "b"))
KNOBS = (CAP, REPORT, NOOP)
RULE = TuneRule(alpha=0.05, margin=0.3, max_rounds=3)


def _config(knobs: tuple[TuneKnob, ...] = KNOBS) -> TuneConfig:
    bench = BenchConfig(url="", concurrencies=(32,), requests=8)
    return TuneConfig(knobs, bench, margin=0.3, max_rounds=3, screen=True)


def _record(knobs: tuple[TuneKnob, ...] = KNOBS) -> TuneRecord:
    return _config(knobs).record((None,) * len(knobs), tune_id=None)


def _value(values: tuple[str, ...], effects: dict[str, float], noise: float) -> float:
    """The cap's high value multiplies tok/s by ``e^effects[cap]``; the others' by theirs."""
    log = sum(
        effects.get(k.knob, 0.0) for k, v in zip(KNOBS, values, strict=True) if v == k.values[1]
    )
    return 1000.0 * math.exp(log + noise)


def _screen_visits(
    record: TuneRecord, effects: dict[str, float], sd: float, seed: int = 0
) -> TuneRecord:
    """Run the screening phase of ``record`` on simulated values: each visit in its block's
    order, as ops does; the block's shared condition cancels in every contrast."""
    rng = random.Random(seed)
    assert record.screening is not None
    screening = record.screening
    while True:
        screening, block = screen(screening, record.rule, record.levels, record.metric)
        if block is None:
            return replace(record, screening=screening,
                           arms=follow_up_arms(record.knobs, screening))  # fmt: skip
        shared = rng.gauss(0.0, 0.05)
        for arm in block.order:
            value = _value(screening.values(arm), effects, shared + rng.gauss(0.0, sd))
            n = len(screening.visits)
            visit = ArmVisit(
                arm, block.block - 1, None, arm, {32: value}, 0, (), n, "", 1.0, {32: 2.0}
            )
            screening = Screening(screening.design, (*screening.visits, visit))


def test_each_screened_knob_takes_exactly_two_values_and_a_refusal_names_the_knob() -> None:
    with pytest.raises(ValueError, match="--max-running-requests has 3"):
        _config((TuneKnob("decode", "--max-running-requests", ("4", "32", "64")), REPORT))
    factors = screen_factors([("A", ("lo", "hi"))])
    assert factors[0].low == "lo" and factors[0].high == "hi"
    record = _record()
    assert record.arms == () and record.screening is not None
    assert len(record.screening.design.runs) == 8  # no resolution-IV fraction of 3: the full 2^3
    assert (
        record.screening.labels[0]
        == "--max-running-requests=4, --enable-cache-report=off, SERVELAB_NOOP=a"
    )


def test_the_one_knob_that_matters_goes_on_and_the_others_are_held_low() -> None:
    record = _screen_visits(_record(), {CAP.knob: math.log(7.0)}, sd=0.01)
    screening = record.screening
    assert screening is not None and screening.follow_up is not None
    assert screening.blocks == 3 and len(screening.visits) == 24  # every run in every block
    (level,) = screening.levels
    status = {e.contrast.effects[0]: e.status for e in level.effects}
    assert status[(CAP.knob,)] is EffectStatus.ACTIVE
    assert all(s is EffectStatus.NEGLIGIBLE for e, s in status.items() if e != (CAP.knob,))
    assert screening.follow_up == FollowUp((CAP.knob,), (), (REPORT.knob, NOOP.knob), True)
    assert [(a.label, a.values) for a in record.arms] == [("4", ("4", "off", "a")),
                                                          ("64", ("64", "off", "a"))]  # fmt: skip
    block = next_block(record)  # the tune's first block: its two arms
    assert block is not None and block.block == 1 and set(block.order) == {"4", "64"}


def test_a_noisy_screening_stops_at_its_budget_and_keeps_what_it_cannot_rule_out() -> None:
    record = _screen_visits(_record(), {CAP.knob: math.log(7.0)}, sd=0.3)
    screening = record.screening
    assert screening is not None and screening.follow_up is not None
    assert screening.blocks == RULE.max_rounds and not screening.follow_up.decided
    assert CAP.knob in screening.follow_up.factors and len(screening.follow_up.factors) > 1
    assert len(record.arms) == 2 ** len(screening.follow_up.factors)


def test_no_knob_left_means_no_tune_and_the_cost_is_against_the_full_grid() -> None:
    record = conclude_tune(_screen_visits(_record(), {}, sd=0.01))
    screening = record.screening
    assert screening is not None and screening.follow_up is not None
    assert screening.follow_up.factors == () and record.arms == ()
    assert next_block(record) is None and record.tunes == () and record.best is None
    assert record.cost is not None and record.full_cost is not None
    assert record.cost.visits == 24 and record.cost.rounds == 3
    assert record.full_cost.visits == len(grid(KNOBS)) * 3 == 24


def test_the_phase_stops_only_when_every_level_is_decided_or_at_the_budget() -> None:
    record = _screen_visits(_record(), {CAP.knob: math.log(7.0)}, sd=0.01)
    assert record.screening is not None
    levels = record.screening.levels
    assert screen_stopped(levels, 3, RULE) and not screen_stopped((), 2, RULE)
    undecided = EffectEstimate(
        levels[0].effects[1].contrast, 2, 0.0, -1.0, 1.0, EffectStatus.UNDECIDED
    )
    mixed = (LevelEffects(32, (undecided,)),)
    assert not screen_stopped(mixed, 2, RULE) and screen_stopped(mixed, 3, RULE)
    merged = merged_follow_up(record.screening.design, (*levels, LevelEffects(64, (undecided,))))
    assert merged.factors == (CAP.knob, REPORT.knob) and not merged.decided


def test_a_journal_splits_back_into_the_screenings_visits_and_the_tunes() -> None:
    screened = _screen_visits(_record(), {CAP.knob: math.log(7.0)}, sd=0.01)
    assert screened.screening is not None
    tune_visits = [
        ArmVisit(arm, 0, None, arm, {32: v}, 0, (), 24 + i, "", 1.0, {32: 2.0})
        for i, (arm, v) in enumerate((("4", 150.0), ("64", 1000.0)))
    ]
    journal = (*screened.screening.visits, *tune_visits)
    back = with_visits(_record(), journal)
    assert back.screening == screened.screening and back.arms == screened.arms
    assert back.visits == tuple(tune_visits) and back.all_visits == journal
    partial = with_visits(_record(), journal[:10])  # interrupted in block 2 of the screening
    assert partial.screening is not None and partial.screening.follow_up is None
    assert len(partial.screening.visits) == 10 and partial.visits == () and partial.arms == ()
    _, block = screen(partial.screening, RULE, (32,), TuneMetric.THROUGHPUT)
    assert block is not None and block.block == 2


def test_a_screened_record_reads_back_and_an_older_record_has_no_screening() -> None:
    record = conclude_tune(_screen_visits(_record(), {CAP.knob: math.log(7.0)}, sd=0.01))
    back = decode(TuneRecord, encode(record))
    assert back.screening == record.screening and encode(back) == encode(record)
    plain = conclude_tune(TuneRecord((CAP,), grid((CAP,)), TuneMetric.THROUGHPUT, (32,), RULE))
    assert "screening" not in encode(plain)
    assert decode(TuneRecord, encode(plain)).screening is None
    old_config = {k: v for k, v in encode(_config()).items() if k != "screen"}
    assert decode(TuneConfig, old_config).screen is False
