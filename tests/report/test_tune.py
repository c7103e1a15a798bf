"""A tune in words and a plot, and a bisection in words: from records as the ledger holds them."""

from __future__ import annotations

import json
import math
from dataclasses import replace

from servelab.core.ab.factorial import FollowUp, screening_design
from servelab.core.ab.result import ArmVisit
from servelab.core.ab.screenrun import Screening, screen_factors
from servelab.core.ab.tune import TuneOutcome, TuneRule
from servelab.core.ab.tunecheck import Misclaim, RuleCheck
from servelab.core.ab.tunerun import (
    TuneKnob,
    TuneMetric,
    TuneRecord,
    conclude_tune,
    follow_up_arms,
    grid,
    next_block,
    replay,
    screen,
)
from servelab.core.case.bisect import Bisected, Change, ProbeOutcome
from servelab.core.case.experiment import ArmTally, decide
from servelab.core.case.probe import (
    ARM_BAD,
    ARM_PROBE,
    BisectConclusion,
    BisectRecord,
    ProbeRecord,
    bisect_verdicts,
)
from servelab.core.ledger.codec import decode, encode
from servelab.ops.ab.tuneplan import LevelPlan, TunePlan
from servelab.ops.case.bisect import BisectOutcome
from servelab.report.case import bisect_lines, describe_bisect_event, describe_bisected
from servelab.report.tune import headline, plan_markdown, tune_json, tune_markdown, tune_png

CTAS = TuneKnob("decode", "SGLANG_SM120_MMA_TARGET_CTAS", ("128", "256", "512"))
#: The model's C64: 128 and 256 tie, 512 is 12.8% ahead.
MEANS = {"128": 1555.0, "256": 1555.0, "512": 1754.0}


def _record() -> TuneRecord:
    rule, visits = TuneRule(max_rounds=8), list[ArmVisit]()
    labels = tuple(MEANS)
    step = 0
    while (block := replay(labels, rule, (64,), TuneMetric.THROUGHPUT, visits)[1]) is not None:
        for arm in block.order:
            step += 1
            wobble = 0.01 * math.sin(step)  # a deterministic few-percent noise
            visits.append(ArmVisit(arm, block.block - 1, step, arm,
                                   {64: MEANS[arm] * math.exp(wobble)}, 0, (), len(visits), "",
                                   3.0, {64: 9.0}))  # fmt: skip
    record = TuneRecord((CTAS,), grid([CTAS]), TuneMetric.THROUGHPUT, (64,), rule,
                        original=("256",), visits=tuple(visits), tune_id=7)  # fmt: skip
    return conclude_tune(record)


def test_the_tune_reads_as_its_ranking_eliminations_and_cost() -> None:
    record = _record()
    (level,) = record.tunes
    assert level.result.winner == "512" and level.result.outcome is TuneOutcome.BEST
    text = tune_markdown(record)
    assert headline(record) in text and "C64: 512" in headline(record)
    assert "### C64: winner 512: one arm left: every other one was shown worse" in text
    assert "Not told apart: 128, 256 (no interval orders them)." in text
    assert text.count("dropped after block") == 2 and "against 512, the leader then" in text
    assert "Left as found: SGLANG_SM120_MMA_TARGET_CTAS=256." in text
    assert f"Cost: {record.blocks} blocks, {len(record.visits)} visits (co-restarts)" in text
    assert "the full design, every arm in every one of 8 blocks: 24 visits" in text
    assert "Even-Dar, Mannor & Mansour 2006" in text
    doc = json.loads(tune_json(record, ["out/tune-7.md"]))
    assert doc["files"] == ["out/tune-7.md"] and doc["tune_id"] == 7 and doc["best"] == "512"
    assert doc == {"ok": True, **encode(record), "headline": headline(record),
                   "files": ["out/tune-7.md"]}  # fmt: skip
    assert json.loads(tune_json(record, ok=False))["ok"] is False


def test_a_tune_on_capacity_reads_as_capacity_under_its_slo() -> None:
    rule, visits = TuneRule(max_rounds=8), list[ArmVisit]()
    step = 0
    while (block := replay(tuple(MEANS), rule, (0,), TuneMetric.CAPACITY, visits)[1]) is not None:
        for arm in block.order:
            step += 1
            value = MEANS[arm] / 30 * math.exp(0.01 * math.sin(step))  # about C52 to C58
            visits.append(ArmVisit(arm, block.block - 1, step, arm, {0: value}, 0, (),
                                   len(visits), "", 3.0, {0: 60.0}))  # fmt: skip
    record = conclude_tune(TuneRecord((CTAS,), grid([CTAS]), TuneMetric.CAPACITY, (0,), rule,
                                      original=("256",), visits=tuple(visits),
                                      slo="tpot_p90=17.2ms"))  # fmt: skip
    text = tune_markdown(record)
    assert "capacity: 512" in headline(record) and "C0" not in text
    assert "### capacity: winner 512" in text
    assert "| rank | arm | status | capacity (geometric mean, blocks) |" in text
    assert "Capacity (the largest load meeting the SLO" in text
    assert "under the SLO tpot_p90=17.2ms per visit" in text
    assert json.loads(tune_json(record))["slo"] == "tpot_p90=17.2ms" and "slo" not in encode(
        _record()
    )
    assert tune_png(record).startswith(b"\x89PNG")


def test_the_tune_plot_is_a_deterministic_png() -> None:
    record = _record()
    png = tune_png(record)
    assert png.startswith(b"\x89PNG") and png == tune_png(record)


def test_the_plan_reads_per_level() -> None:
    outcomes = dict.fromkeys(TuneOutcome, 0) | {TuneOutcome.BEST: 150,
                                                TuneOutcome.WITHIN_MARGIN: 40,
                                                TuneOutcome.BUDGET: 10}  # fmt: skip
    check = RuleCheck(200, dict.fromkeys(Misclaim, 0), {}, outcomes, 6.5, 15.2, 36)
    text = plan_markdown(TunePlan(3, 0.05, 200, (4,), (LevelPlan(64, 0.021, check),
                                                     LevelPlan(96, math.nan, None))))  # fmt: skip
    assert "3 arms, one better by +5.0%" in text and "Noise from 1 recorded A/B(s)" in text
    assert "| 64 | 2.10% | 6.5 | 15.2 (36) | 150 / 40 / 10 | 0/200 |" in text
    assert "| 96 | no recorded noise |" in text


def test_a_bisection_reads_as_its_changes_probes_verdicts_and_resolve_line() -> None:
    changes = (Change("decode", "SGLANG_SM120_MLA_KV_TILE", None, "16"),
               Change("decode", "--enable-metrics", "off", "on"))  # fmt: skip
    bad, probe = ArmTally(ARM_BAD, None, 8, 8), ArmTally(ARM_PROBE, None, 8, 0)
    probes = (ProbeRecord(3, 40, 1, (1,), ProbeOutcome.GOOD, 1, bad, probe, decide(bad, probe)),)
    result = Bisected((0,), (changes[0],), True, (), 1, 0)
    start = BisectRecord(3, changes, good="verify:2", bad="now", rounds=3)
    end = BisectConclusion(3, 40, result, bisect_verdicts(changes, result), 2, 14.5)
    outcome = BisectOutcome(40, start, probes, end, 42, 9, ("16", "on"))
    assert describe_bisected(start, end) == (
        "case bisect: guilty decode SGLANG_SM120_MLA_KV_TILE (unset) → 16 (1-minimal), found in 1 "
        "probe(s) over 2 change(s) (2 visits, 14 s)"
    )
    lines = bisect_lines(outcome)
    assert lines[0] == "  changes (verify:2 → now):"
    probe_line = "  probe 1: the good state with decode:--enable-metrics=on: GOOD after 1 round(s)"
    assert probe_line in lines[3]
    assert lines[-1] == ("  resolve with: servelab case resolve 3 --root-cause ... --convict "
                         "knob:decode/SGLANG_SM120_MLA_KV_TILE --exonerate "
                         "knob:decode/--enable-metrics")  # fmt: skip
    assert describe_bisect_event(decode(BisectRecord, encode(start))).startswith(
        "bisect started: 2 change(s)"
    )
    assert describe_bisect_event(decode(ProbeRecord, encode(probes[0]))) == (
        "bisect probe 1: changes 2 applied: GOOD after 1 round(s), p = 0.000155"
    )
    assert describe_bisect_event(decode(BisectConclusion, encode(end))) == (
        "bisected: guilty decode SGLANG_SM120_MLA_KV_TILE (unset) → 16 in 1 probe(s)"
    )


def _screened() -> TuneRecord:
    """Three knobs screened at C32: only the cap matters (×7), the others change nothing; then
    the tune of the cap's two values."""
    knobs = (TuneKnob("decode", "--max-running-requests", ("4", "64")),
             TuneKnob("decode", "--enable-cache-report", ("off", "on")),
             TuneKnob("decode", "SERVELAB_NOOP", ("a", "b")))  # fmt: skip
    rule = TuneRule(margin=0.3, max_rounds=3)
    record = TuneRecord(knobs, (), TuneMetric.THROUGHPUT, (32,), rule, original=(None,) * 3,
                        screening=Screening(screening_design(screen_factors(
                            [(k.knob, k.values) for k in knobs]))))  # fmt: skip
    assert record.screening is not None
    screening, step = record.screening, 0
    while (found := screen(screening, rule, (32,), TuneMetric.THROUGHPUT))[1] is not None:
        screening, block = found
        assert block is not None
        for arm in block.order:
            step += 1
            value = (700.0 if screening.values(arm)[0] == "64" else 100.0) * math.exp(
                0.005 * math.sin(step))  # fmt: skip
            visit = ArmVisit(arm, block.block - 1, step, arm, {32: value}, 0, (), step - 1, "",
                             3.0, {32: 9.0})  # fmt: skip
            screening = Screening(screening.design, (*screening.visits, visit))
    record = replace(record, screening=found[0], arms=follow_up_arms(knobs, found[0]))
    visits = list[ArmVisit]()
    while (block := next_block(replace(record, visits=tuple(visits)))) is not None:
        for arm in block.order:
            step += 1
            value = (700.0 if arm == "64" else 100.0) * math.exp(0.005 * math.sin(step))
            visits.append(ArmVisit(arm, block.block - 1, step, arm, {32: value}, 0, (), step - 1,
                                   "", 3.0, {32: 9.0}))  # fmt: skip
    return conclude_tune(replace(record, visits=tuple(visits)))


def test_a_screened_tune_reads_as_its_contrasts_then_its_ranking_and_both_costs() -> None:
    record = _screened()
    text = tune_markdown(record)
    assert "screened, 2 arms followed up" in text
    screening_at = text.index("### Screening: 8 runs, the full factorial of 3 knobs; 3 block(s), "
                              "24 visits, every contrast decided")  # fmt: skip
    assert screening_at < text.index("### C32: winner 64")
    assert (
        "| contrast (aliased effects) | low → high | interval (each at α = 0.0083) | status |"
        in text
    )
    assert "| --max-running-requests | +603.1% | [+587.0%, +619.7%] | active |" in text
    assert "| --enable-cache-report × SERVELAB_NOOP | -0.2% | [-2.2%, +1.8%] | negligible |" in text
    assert text.count("| negligible |") == 5
    assert ("Follow-up: a tune of 2 arms over --max-running-requests; held at their low value: "
            "--enable-cache-report=off, SERVELAB_NOOP=a.") in text  # fmt: skip
    tuned = len(record.visits)
    assert (
        f"Cost: {3 + record.blocks} blocks, {24 + tuned} visits (co-restarts) (screening 3 "
        f"blocks, 24 visits; tune {record.blocks} blocks, {tuned} visits)"
    ) in text
    assert (
        "the full grid's design, every one of its 8 arms in every one of 3 blocks: 24 visits"
        in text
    )
    assert json.loads(tune_json(record))["screening"]["follow_up"]["factors"] == [
        "--max-running-requests"
    ]


def test_a_screening_that_leaves_nothing_says_so() -> None:
    record = _screened()
    assert record.screening is not None and record.screening.follow_up is not None
    nothing = FollowUp(
        (), (), record.screening.follow_up.factors + record.screening.follow_up.fixed, True
    )
    screening = replace(record.screening, follow_up=nothing)
    empty = conclude_tune(replace(record, arms=(), visits=(), screening=screening))
    text = tune_markdown(empty)
    assert "nothing left to tune after the screening" in headline(empty)
    assert "Every effect is negligible: no knob left to tune, the original values kept" in text
    assert "Left as found" in text
