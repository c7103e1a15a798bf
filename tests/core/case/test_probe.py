"""A bisection's pure parts: the points and the changes between them, the test, the probe's rule
(Fisher's test against the bad state, each look at alpha / R), the records through the codec, and
the verdicts a bisection gives and ``case resolve`` takes."""

from __future__ import annotations

import json

import pytest

from servelab.core.bench.contract import BenchConfig
from servelab.core.case.bisect import Bisected, Change, ProbeOutcome, next_step, record_probe
from servelab.core.case.bisect import start_bisect as start
from servelab.core.case.experiment import ArmTally
from servelab.core.case.points import (
    Point,
    PointKind,
    backup_time,
    changes_between,
    parse_point,
    values_at,
)
from servelab.core.case.probe import (
    ARM_BAD,
    ARM_PROBE,
    BisectConclusion,
    BisectRecord,
    ProbeRecord,
    ProbeTest,
    ProbeTestKind,
    bisect_verdicts,
    judge_probe,
    parse_probe_test,
    round_order,
)
from servelab.core.case.record import CaseEvent, CaseEvidence
from servelab.core.case.verdicts import WHY_EXPERIMENT_CONTRADICTS, refusals
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.ledger.codec import decode, encode
from servelab.errors import CaseError
from tests.support.old_rows import BISECT_BEFORE_TYPED_BENCH

CTAS = "SGLANG_SM120_MMA_TARGET_CTAS"


def _change(cid: int, at: str, name: str, old: str | None, new: str | None) -> KnobChangeRecord:
    return KnobChangeRecord(cid, at, "decode", name, old, new, backup_path=f"b{cid}")


HISTORY = [
    _change(1, "2026-03-01T10:00:00.000Z", CTAS, "256", "512"),
    _change(2, "2026-03-01T11:00:00.000Z", "--disable-overlap-schedule", None, "on"),
    _change(3, "2026-03-01T12:00:00.000Z", CTAS, "512", "256"),
    _change(4, "2026-03-01T13:00:00.000Z", "SGLANG_TILE", None, "16"),
    _change(5, "2026-03-01T14:00:00.000Z", CTAS, "256", "512"),
]


def test_points_parse_and_refuse() -> None:
    assert parse_point(" now ") == Point(PointKind.NOW)
    assert parse_point("verify:12") == Point(PointKind.VERIFY, "12")
    assert parse_point("backup:/s/decode.env.bak-20260301T120000Z").kind is PointKind.BACKUP
    assert parse_point("2026-03-01T12:00:00Z") == Point(PointKind.TIME, "2026-03-01T12:00:00Z")
    assert str(parse_point("verify:12")) == "verify:12" and str(parse_point("now")) == "now"
    for bad in ("yesterday", "verify:x", "verify:\u00b2", "verify:\u0663", "backup:", "2026-13"):
        with pytest.raises(CaseError, match="bad point"):
            parse_point(bad)
    assert backup_time("/s/decode.env.bak-20260301T120501.25Z") == "2026-03-01T12:05:01.000Z"
    assert backup_time("decode.env") is None


def test_values_at_a_time_or_before_a_change() -> None:
    at = values_at(HISTORY, at="2026-03-01T11:30:00.000Z")
    assert at == {
        ("decode", CTAS): "512",
        ("decode", "--disable-overlap-schedule"): "on",
        ("decode", "SGLANG_TILE"): None,
    }  # fmt: skip  (its first change found it unset)
    before = values_at(HISTORY, before_id=1)
    assert before[("decode", CTAS)] == "256" and before[("decode", "SGLANG_TILE")] is None
    assert values_at(HISTORY, before_id=4) == values_at(HISTORY, at="2026-03-01T12:30:00.000Z")
    with pytest.raises(ValueError):
        values_at(HISTORY)


def test_the_changes_are_the_knobs_that_differ_and_a_knob_changed_back_is_none() -> None:
    good = values_at(HISTORY, at="2026-03-01T10:30:00.000Z")
    bad = values_at(HISTORY, at="2026-03-01T15:00:00.000Z")
    knobs = [("decode", CTAS), ("decode", "--disable-overlap-schedule"), ("decode", "SGLANG_TILE"),
             ("decode", "UNRECORDED")]  # fmt: skip
    assert changes_between(good, bad, knobs) == (
        Change("decode", "--disable-overlap-schedule", None, "on"),
        Change("decode", "SGLANG_TILE", None, "16"),
    )


def test_the_test_parses_prints_and_fails() -> None:
    assert parse_probe_test("soak") == ProbeTest()
    test = parse_probe_test("throughput@C64<3000")
    assert (test.kind, test.concurrency, test.below) == (ProbeTestKind.THRESHOLD, 64, True)
    assert test.value == 3000.0
    assert str(test) == "throughput@C64<3000" and test.fails(2999.0) and not test.fails(3000.0)
    above = parse_probe_test("throughput@C8>1.5")
    assert above.fails(2.0) and not above.fails(1.0)
    for bad in ("soak!", "throughput@64<1", "ttft@C64<1", "throughput@C64<x", "throughput@C0<1",
                "throughput@C64<0", "throughput@C64<inf"):  # fmt: skip
        with pytest.raises(CaseError, match="bad test"):
            parse_probe_test(bad)


def test_a_probe_is_judged_against_the_bad_state_at_alpha_over_its_looks() -> None:
    assert [round_order(r) for r in range(3)] == [(ARM_BAD, ARM_PROBE), (ARM_PROBE, ARM_BAD),
                                                  (ARM_BAD, ARM_PROBE)]  # fmt: skip

    def judge(bad: tuple[int, int], probe: tuple[int, int], rounds: int = 3) -> object:
        tallies = ArmTally(ARM_BAD, None, bad[1], bad[0]), ArmTally(ARM_PROBE, None, *probe[::-1])
        return judge_probe(*tallies, alpha=0.05, effect=0.5, rounds=rounds)[0]

    assert judge((8, 8), (0, 8)) is ProbeOutcome.GOOD  # p = 1.6e-4 < 0.05/3
    assert judge((8, 8), (8, 8)) is ProbeOutcome.BAD  # the difference is bounded below 0.5
    assert judge((4, 4), (0, 4)) is None  # p = 0.029: enough at one look, not at 0.05/3
    assert judge((4, 4), (0, 4), rounds=1) is ProbeOutcome.GOOD
    assert judge((0, 8), (0, 8)) is None  # the bad state never failed: nothing reproduced
    # a bad state failing 2 of 21 and a probe none: bounded under 0.5, but not failing alike
    assert judge((2, 21), (0, 21)) is None


def _six_with(guilty: set[int]) -> tuple[tuple[Change, ...], Bisected]:
    """ddmin over six changes against a truth: bad exactly when every guilty change is in."""
    changes = tuple(Change("decode", f"K{i}", "0", "1") for i in range(6))
    state = start(changes)
    while not isinstance(step := next_step(state), Bisected):
        bad = guilty <= set(step.indices)
        state = record_probe(state, ProbeOutcome.BAD if bad else ProbeOutcome.GOOD)
    return changes, step


def test_verdicts_convict_the_guilty_and_exonerate_the_rest() -> None:
    changes, one = _six_with({3})
    assert one.indices == (3,) and one.probes < 6
    verdicts = dict(bisect_verdicts(changes, one))
    assert verdicts == {f"knob:decode/K{i}": "convicted" if i == 3 else "exonerated"
                        for i in range(6)}  # fmt: skip
    changes, pair = _six_with({1, 4})
    assert pair.indices == (1, 4)
    assert [t for t, v in bisect_verdicts(changes, pair) if v == "convicted"] == [
        "knob:decode/K1", "knob:decode/K4"]  # fmt: skip
    unproven = Bisected((1, 4), (changes[1], changes[4]), False, (4,), 7, 1)
    assert dict(bisect_verdicts(changes, unproven))["knob:decode/K1"] == "convicted"
    assert "knob:decode/K4" not in dict(bisect_verdicts(changes, unproven))


def test_resolve_takes_a_bisections_verdicts() -> None:
    changes, result = _six_with({2})
    end = BisectConclusion(1, 40, result, bisect_verdicts(changes, result), 10, 60.0)
    events = [CaseEvent(BisectConclusion.KIND, "t", encode(end), 41, 1)]
    evidence = [CaseEvidence("bisect", 41, "case bisect", "t", 7, 1)]
    guilty, other = "knob:decode/K2", "knob:decode/K0"
    assert refusals({guilty: "convicted", other: "exonerated"}, events, evidence, {}) == []
    refused = refusals({guilty: "exonerated", other: "convicted"}, events, evidence, {})
    assert {(r.target, r.why, r.evidence_ids) for r in refused} == {
        (guilty, WHY_EXPERIMENT_CONTRADICTS, (7,)),
        (other, WHY_EXPERIMENT_CONTRADICTS, (7,)),
    }
    assert refusals({guilty: "convicted"}, events, [], {})[0].evidence_ids == ()  # not evidence


_BENCH = BenchConfig("http://127.0.0.1:8000", concurrencies=(64,), requests=64)


def test_the_records_read_back_through_the_codec() -> None:
    changes, result = _six_with({0, 5})
    test = parse_probe_test("throughput@C64<1500")
    records = [
        BisectRecord(1, changes, test, "2026-03-01T10:00:00Z", "now", 3, bench=_BENCH),
        BisectRecord(1, changes, parse_probe_test("soak"), "2026-03-01T10:00:00Z", "now", 3),
        ProbeRecord(1, 40, 2, (0, 1, 2), ProbeOutcome.BAD, 1, ArmTally(ARM_BAD, None, 3, 3),
                    ArmTally(ARM_PROBE, None, 3, 3)),
        BisectConclusion(1, 40, result, bisect_verdicts(changes, result), 12, 80.5),
    ]  # fmt: skip
    for record in records:
        assert decode(type(record), json.loads(json.dumps(encode(record)))) == record


def test_a_bisection_stored_before_its_bench_was_typed_reads_the_same() -> None:
    """The bench was JSON read by ``decode(BenchConfig, start.bench) if start.bench else None``
    when a bisection resumed: it reads as that config (an older one, without the fields added
    since, too), a soak test's ``{}`` as none, and each is stored again as it was."""
    threshold, soak = (json.loads(text) for text in BISECT_BEFORE_TYPED_BENCH)
    read = decode(BisectRecord, threshold)
    assert read.bench == decode(BenchConfig, threshold["bench"])
    assert read.bench.requests == 64 and read.bench.concurrencies == (64,)
    assert read.bench.workers == 1 and read.bench.headers == ()
    assert {k: encode(read)["bench"][k] for k in threshold["bench"]} == threshold["bench"]
    assert encode(read) == {**threshold, "bench": encode(read.bench)}
    none = decode(BisectRecord, soak)
    assert none.bench is None and none.workload_soak_id == 7
    assert encode(none) == soak
