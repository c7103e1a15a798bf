"""The one A/B result: worked out from its visits, written and read by the codec, and the shapes
older servelab stored (real rows, written by that servelab's own code) read as today's."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

import servelab.core.ab.result as result_mod
from servelab.core.ab.compare import Comparison, Verdict
from servelab.core.ab.design import DesignCost, Order
from servelab.core.ab.result import (
    AbDesign,
    AbResult,
    ArmVisit,
    Decided,
    Keep,
    Stop,
    better_arm,
    conclude,
    kept_value,
    undecided_levels,
    upgrade_ab_result,
)
from servelab.core.ab.sequential import Boundary, Decision
from servelab.core.ledger.codec import decode, encode
from tests.support.old_rows import AB_RUN_BEFORE_CODEC, FIRST_AB_RUN


def test_public_api_is_explicit() -> None:
    for name in result_mod.__all__:
        assert hasattr(result_mod, name), name


def _started(until_decided: bool = False, rounds: int = 3) -> AbResult:
    design = AbDesign(Order.ABBA, until_decided=until_decided, max_rounds=rounds,
                      concurrencies=(80, 96), gpus=8, session_id=4)  # fmt: skip
    return AbResult("decode", "K", "256", "512", "512", design=design)


def _visits() -> tuple[ArmVisit, ...]:
    """Three ABBA rounds: 512 clearly better at C96, 256's C96 clearly below its C80."""
    out = []
    for rnd, (e, f) in enumerate(((1.0, 1.0), (1.003, 1.009), (0.998, 0.993))):
        pair = [("256", {80: 1891.0 * e, 96: 1837.0 * e}), ("512", {80: 1912.0 * f, 96: 1990 * f})]
        for pos, (arm, thr) in enumerate(pair if rnd % 2 == 0 else pair[::-1]):
            served = {80: 1880.0 * e if arm == "256" else 2068.0 * e}  # servers: +10% at C80
            out.append(ArmVisit(arm, rnd, 10 + rnd, arm, thr, 0, (rnd,), 2 * rnd + pos, "",
                                30.0, {80: 20.0, 96: 20.0}, served))  # fmt: skip
    return tuple(out)


def test_conclude_works_out_arms_comparisons_anomalies_and_cost_from_the_visits() -> None:
    result = conclude(replace(_started(), visits=_visits(), restored=True))
    assert [a.value for a in result.arms] == ["256", "512"]
    assert result.arms[0].throughput[96] == pytest.approx((1837.0, 1842.511, 1833.326))
    assert result.arms[0].verifications == (10, 11, 12)
    assert result.throughput("512")[80] == result.arms[1].throughput[80]
    by_c = {c.concurrency: c for c in result.comparisons}
    assert by_c[96].verdict == Verdict.BETTER and by_c[96].ratio > 1.07
    assert [(a.arm, a.concurrency, a.previous) for a in result.anomalies] == [("256", 96, 80)]
    design = result.design
    assert (design.rounds_run, design.stopped) == (3, Stop.FIXED)
    assert design.cost == DesignCost(3, 6, 6 * 70.0 / 60, 8 * 6 * 70.0 / 60, False)
    assert design.fixed_cost is not None and design.fixed_cost.rounds == 3
    assert set(design.decided) == {80, 96} and design.session_id == 4


def test_the_servers_cross_check_is_derived_and_written() -> None:
    result = conclude(replace(_started(), visits=_visits()))
    (flag,) = result.server_disagreements  # the client sees +1.1% at C80, the decodes +10%
    assert (flag.concurrency, flag.server_ratio) == (80, pytest.approx(1.1))
    assert flag.difference == pytest.approx(flag.client_ratio / 1.1 - 1)
    assert flag.difference < -flag.tolerance
    doc = encode(result)
    assert doc["server_disagreements"] == [encode(f) for f in result.server_disagreements]
    assert decode(AbResult, doc).server_disagreements == result.server_disagreements


def test_a_result_round_trips_through_strict_json() -> None:
    result = conclude(replace(_started(until_decided=True, rounds=6), visits=_visits()))
    text = json.dumps(encode(result), allow_nan=False)  # NaN and infinities are written null
    again = decode(AbResult, text)
    assert encode(again) == encode(result)
    assert again.design.decided[96] == Decided(3, Decision.BETTER)
    assert again.design.boundary == Boundary.POCOCK and again.design.looks == 6
    seq = again.comparisons[0].sequential
    assert seq is not None and seq.n == 3
    assert math.isnan(seq.low) or math.isfinite(seq.low)  # an unbounded end reads back NaN


def test_a_decided_concurrency_leaves_the_experiment() -> None:
    started = replace(_started(until_decided=True, rounds=8), design=replace(
        _started().design, until_decided=True, max_rounds=8, concurrencies=(64, 80)))  # fmt: skip
    visits: list[ArmVisit] = []
    for rnd, e in enumerate((1.0, 1.004, 0.997)):
        visits += [
            ArmVisit("256", rnd, 1, "256", {64: 1000.0 * e, 80: 1000.0 * e}, 0),
            ArmVisit("512", rnd, 1, "512", {64: 1128.0 * e * (1 + 0.001 * rnd), 80: 1000.0 / e}, 0),
        ]
    result = replace(started, visits=tuple(visits))
    assert undecided_levels(result, 2) == (64, 80)  # two rounds: unbounded, nothing decided
    assert undecided_levels(result, 3) == (80,)  # C64 decided better after three rounds
    fixed = replace(result, design=replace(result.design, until_decided=False))
    assert undecided_levels(fixed, 3) == (64, 80)
    assert conclude(result).design.stopped == Stop.MAX_ROUNDS  # C80 never decided


def test_the_first_ab_rows_read_with_their_arms_labels_as_values() -> None:
    doc = upgrade_ab_result(json.loads(FIRST_AB_RUN["result"]))
    result = decode(AbResult, doc)
    assert [a.value for a in result.arms] == ["256", "512"]
    assert result.arms[0].throughput[64] == (1000.0, 1004.0) and result.arms[0].verifications
    assert [c.verdict for c in result.comparisons] == [Verdict.BETTER] * 3
    assert (
        result.comparisons[0].method.startswith("Fieller") and result.comparisons[0].paired is None
    )
    assert [(a.arm, a.concurrency, a.previous) for a in result.anomalies] == [
        ("256", 96, 80),
        ("512", 80, 64),
    ]
    assert result.visits == () and result.design == AbDesign()  # not recorded then
    assert "label" not in json.dumps(encode(result))


def test_the_rows_before_the_codec_read_as_they_were_written() -> None:
    stored = json.loads(AB_RUN_BEFORE_CODEC["result"])  # NaN written as JSON's non-standard NaN
    result = decode(AbResult, upgrade_ab_result(stored))
    assert result.design.concurrencies == (80, 96)  # not recorded then: the arms' levels
    assert result.design.order == Order.ABBA and result.design.max_rounds == 6
    assert len(result.visits) == 6 and result.visits[1].server_throughput == {80: 1905.0}
    assert result.arms[1].verifications == (10, 11, 12) and result.restored
    # every key it stored is written again, with the same values (NaN now null)
    again = encode(result)
    assert again["design"].pop("concurrencies") == [80, 96]
    assert json.loads(json.dumps(again)) == json.loads(
        json.dumps(stored).replace("NaN", "null")
    ) | {"server_disagreements": again["server_disagreements"]}


def _verdicts(*verdicts: Verdict) -> AbResult:
    comparisons = tuple(
        Comparison(c, 1.0, (0.9, 1.1), verdict, "256", "512") for c, verdict in enumerate(verdicts)
    )
    return AbResult("decode", "K", "256", "512", "512", comparisons=comparisons)


def test_keep_names_the_better_arm_one_arm_or_a_value() -> None:
    better, worse = Verdict.BETTER, Verdict.WORSE
    undecided, same = Verdict.INCONCLUSIVE, Verdict.NO_DIFFERENCE
    assert better_arm(_verdicts(better, same)) == "512"
    assert better_arm(_verdicts(worse, undecided)) == "256"
    assert better_arm(_verdicts(better, worse)) is None  # they disagree: neither is better
    assert better_arm(_verdicts(same, undecided)) is None
    assert kept_value(Keep.BETTER, _verdicts(better)) == "512"
    assert kept_value("better", _verdicts(undecided)) is None  # nothing better: restore
    assert kept_value("baseline", _verdicts(better)) == "256"
    assert kept_value("candidate", _verdicts(worse)) == "512"
    assert kept_value("384", _verdicts(better)) == "384"  # a journal from before the arm rule
    # a value names its arm compared as a number, kept in the arm's spelling (not "0256")
    assert kept_value("0256", _verdicts(better)) == "256"
    assert kept_value("512.0", _verdicts(worse)) == "512"
    assert kept_value(None, _verdicts(better)) is None
