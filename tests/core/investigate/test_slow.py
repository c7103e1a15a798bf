"""``investigate --symptom slow`` (pure): the last recorded baseline, "slower" by the A/B's
unpaired interval, and a change's A/B verdict (:mod:`servelab.core.case.abtest`), which
``case resolve`` reads as evidence."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from servelab.core.ab.compare import compare_arms
from servelab.core.ab.record import AbRunRecord
from servelab.core.ab.result import AbArm, AbResult, ArmVisit
from servelab.core.bench.record import BenchRunRecord
from servelab.core.case.abtest import AbTestRecord, judge_slow
from servelab.core.case.record import CaseEvent, CaseEvidence
from servelab.core.case.verdicts import WHY_EXPERIMENT_CONTRADICTS, WHY_NO_SUPPORT, refusals
from servelab.core.investigate.plan import KnobTest, SlowTest, next_action
from servelab.core.investigate.slow import (
    Baseline,
    compare_to_baseline,
    find_baseline,
    run_throughput,
    search_baseline,
    usable,
)
from servelab.core.investigate.state import (
    Decided,
    InvestigationState,
    Stage,
    SuspectChange,
    Symptom,
)
from servelab.core.ledger.codec import encode

URL = "http://127.0.0.1:7001"
CONFIG: dict[str, Any] = {"url": URL, "concurrencies": [16], "repeat": 3, "requests": 48}


def _run(i: int, tok_s: float, *, label: str | None = None, url: str = URL,
         conc: int = 16, **config: Any) -> BenchRunRecord:  # fmt: skip
    summary = {"concurrency": conc, "repeat_index": 0, "interrupted": False,
               "metrics": {"output_throughput": tok_s}}  # fmt: skip
    return BenchRunRecord(i, f"2026-01-0{i}T00:00:00.000Z", label, {**CONFIG, "url": url,
                          **config}, summary)  # fmt: skip


def test_the_baseline_is_the_newest_operator_bench_of_the_deployment_with_its_invocation() -> None:
    runs = [
        _run(1, 900.0),  # an older bench of the same config: not this invocation
        _run(2, 1000.0), _run(3, 1010.0), _run(4, 990.0),
        _run(5, 400.0, label="ab decode K=4 round 1"),  # an A/B's visit: never a baseline
        _run(6, 300.0, label="investigate: reproduce"),  # the investigation's own
        _run(7, 50.0, url="http://127.0.0.1:9999"),  # another deployment
    ]  # fmt: skip
    found = find_baseline(runs, [URL + "/", "http://127.0.0.1:7000"])
    assert found is not None
    baseline, newest = found
    assert baseline.run_ids == (2, 3, 4) and newest.id == 4 and baseline.at.startswith("2026-01-02")
    assert baseline.throughput == {16: (1000.0, 1010.0, 990.0)}
    assert find_baseline(runs[4:6], [URL]) is None  # only experiments' runs: no baseline
    assert find_baseline([], [URL]) is None
    assert run_throughput(replace(runs[0], summary={"metrics": "?"})) is None
    steady = {**runs[0].summary, "metrics": {"output_throughput": 9.0, "steady_throughput": 12.0}}
    assert run_throughput(replace(runs[0], summary=steady)) == (16, 12.0)  # as an A/B values it


def _ab(ab_id: int, at: str, *, kept: str | None = None, original: str | None = "64",
        metric: str = "throughput") -> AbRunRecord:  # fmt: skip
    visits = tuple(ArmVisit(arm, rnd, None, arm, {16: tok}, 0, (run_id,))
                   for arm, rnd, tok, run_id in (("64", 0, 1000.0, 11), ("4", 0, 500.0, 12),
                                                 ("4", 1, 510.0, 13), ("64", 1, 990.0, 14))
                   )  # fmt: skip
    arms = (
        AbArm("64", throughput={16: (1000.0, 990.0)}),
        AbArm("4", throughput={16: (500.0, 510.0)}),
    )
    result = AbResult("decode", "--max-running-requests", "64", "4", original=original, kept=kept,
                      arms=arms, visits=visits)  # fmt: skip
    return AbRunRecord(ab_id, at, "decode", "--max-running-requests", {"metric": metric}, result)


def test_an_ab_is_a_baseline_by_the_arm_it_left_live() -> None:
    visit_runs = [_run(i, 0.0, label=f"ab decode K round {i}") for i in (11, 12, 13, 14)]
    bench = [_run(2, 1000.0), _run(3, 1010.0), _run(4, 990.0)]  # at 2026-01-0N: older
    newer = _ab(5, "2026-02-01T00:00:00.000Z")  # restored its original, 64
    found = find_baseline([*bench, *visit_runs], [URL], [newer])
    assert found is not None
    baseline, run = found
    assert baseline.ab_id == 5 and baseline.run_ids == (11, 14) and run.id == 11
    assert baseline.throughput == {16: (1000.0, 990.0)} and baseline.runs == 2
    assert baseline.label == "A/B #5 decode --max-running-requests=64"
    kept = find_baseline(visit_runs, [URL], [_ab(5, "2026-02-01", kept="4")])
    assert kept is not None and kept[0].throughput == {16: (500.0, 510.0)}  # --keep 4: live
    older = find_baseline([*bench, *visit_runs], [URL], [_ab(5, "2026-01-01T00:00:00.000Z")])
    assert older is not None and older[0].ab_id is None  # the bench is newer
    for other in (_ab(5, "2026-02-01", original="8"), _ab(5, "2026-02-01", metric="goodput")):
        assert find_baseline(visit_runs, [URL], [other]) is None  # neither arm live; not tok/s
    assert find_baseline(visit_runs, ["http://elsewhere"], [newer]) is None


def test_slower_is_the_whole_interval_below_one_never_a_bare_percentage() -> None:
    base = Baseline((1, 2, 3), "2026-01-01T00:00:00.000Z", None, {16: (1000.0, 1010.0, 990.0)})
    slower = compare_to_baseline(base, {16: [600.0, 610.0, 590.0]})
    (p,) = slower.points
    assert slower.slower and p.verdict == "worse" and p.high < 1.0 and slower.lost == p.ratio
    assert slower.point == "run:1" and replace(slower, baseline_ab_id=5).point == "ab:5"
    assert (p.n_baseline, p.n_now) == (3, 3)
    noisy = compare_to_baseline(base, {16: [500.0, 1500.0, 1000.0]})  # -0% mean, wide
    assert not noisy.slower and noisy.points[0].verdict == "no significant difference"
    one = compare_to_baseline(base, {16: [100.0]})  # one run: no interval, never slower
    assert not one.slower and one.points[0].verdict == "inconclusive" and one.lost == 1.0
    assert compare_to_baseline(base, {64: [1.0, 2.0]}).points == ()  # no level in common
    # 2% slower, tightly: significant, but within what another process makes: not slower
    tight = replace(base, throughput={16: (1000.0, 1001.0, 999.0)})
    slight = compare_to_baseline(tight, {16: [980.0, 981.0, 979.0]})
    assert slight.points[0].high < 1.0 and not slight.slower
    assert slight.points[0].verdict == "no significant difference"
    # 8% slower, tightly: slower (the whole interval below SLOWER_BELOW)
    assert compare_to_baseline(tight, {16: [920.0, 921.0, 919.0]}).slower


def _comparisons(change: list[float], revert: list[float]) -> Any:
    return compare_arms({16: change}, {16: revert}, baseline_label="4", candidate_label="64")


def test_a_change_is_guilty_of_slow_when_reverting_it_restores_throughput_by_the_ab_rule() -> None:
    outcome, points = judge_slow(_comparisons([600, 610, 590], [1000, 1010, 990]), 1.6)
    assert outcome == "convicted" and points[0].verdict == "better" and points[0].low > 1.0
    same = _comparisons([1000, 1010, 990], [1001, 1008, 992])
    assert judge_slow(same, 1.6)[0] == "exonerated"  # cannot bring back a 1.6x loss
    assert judge_slow(same, 1.001)[0] == "inconclusive"  # the interval reaches what was lost
    assert judge_slow(_comparisons([1000], [1000]), 1.6)[0] == "inconclusive"


def test_case_resolve_reads_an_ab_test_as_it_reads_a_case_test() -> None:
    target = "knob:decode/--max-running-requests"
    test = AbTestRecord(1, target, "4", "64", 9, 1.6, (), "convicted")
    events = [CaseEvent(AbTestRecord.KIND, "t", encode(test), 5, 1)]
    evidence = [CaseEvidence(AbTestRecord.KIND, 5, None, "t", 30, 1)]
    assert refusals({target: "convicted"}, events, evidence, {}) == []
    (refused,) = refusals({target: "exonerated"}, events, evidence, {})
    assert refused.why == WHY_EXPERIMENT_CONTRADICTS and refused.evidence_ids == (30,)
    (unsupported,) = refusals({target: "convicted"}, events, [], {})  # no evidence row: none
    assert unsupported.why == WHY_NO_SUPPORT


@pytest.mark.parametrize("symptom", [Symptom.SLOW, Symptom.HANG])
def test_a_slowdown_tests_each_change_by_its_own_ab(symptom: Symptom) -> None:
    two = (SuspectChange("decode", "A", "1", "2", "2"), SuspectChange("decode", "B", "x", "y", "y"))
    state = InvestigationState(1, symptom, stage=Stage.DECIDE, suspects=two[:1])
    want = SlowTest(two[0]) if symptom is Symptom.SLOW else KnobTest(two[0])
    assert next_action(state) == want
    if symptom is Symptom.SLOW:
        both = replace(state, suspects=two, decided=(Decided(two[0].target, "exonerated", "ab"),))
        assert next_action(both) == SlowTest(two[1])  # never a bisection or a good state


def test_a_baseline_too_small_to_compare_is_passed_over_and_named() -> None:
    """Issue 38, sixteenth pass (M4): a newer ``bench --requests 1`` was the baseline; compared
    with n=1 it was inconclusive and headlined "did not reproduce"."""
    good = [_run(1, 1000.0), _run(2, 1010.0), _run(3, 990.0)]
    one = _run(4, 20.0, requests=1)  # one request a run (and one run: repeat 1)
    tiny = [replace(one, config={**one.config, "repeat": 1})]
    few = [_run(i, 900.0, requests=20) for i in (5, 6, 7)]  # 20 requests at C16: < 2 a slot
    search = search_baseline([*good, *tiny, *few], [URL])
    assert search.found is not None
    baseline, newest = search.found
    assert baseline.run_ids == (1, 2, 3) and newest.id == 3  # the newest usable one
    assert [s.run_ids for s in search.skipped] == [(5, 6, 7), (4,)]  # newest first
    assert (search.skipped[1].runs, search.skipped[1].requests) == (1, 1)
    assert (search.skipped[0].runs, search.skipped[0].requests) == (3, 20)
    assert baseline.skipped == search.skipped
    slow = compare_to_baseline(baseline, {16: [1000.0, 1005.0, 995.0]})
    assert slow.skipped == search.skipped and not slow.inconclusive
    none = search_baseline([*tiny, *few], [URL])
    assert none.found is None and len(none.skipped) == 2
    assert find_baseline([*tiny, *few], [URL]) is None
    assert usable(Baseline((1,), "t", None, {16: (1.0, 2.0)}), 32) is None  # 2 a slot: usable
    assert usable(Baseline((1,), "t", None, {16: (1.0, 2.0)}), None) is None  # a trace's
    # an A/B of one round: one value an arm, too small; the older bench is the baseline
    one_round = _ab(8, "2026-02-01T00:00:00.000Z")
    arms = tuple(replace(a, throughput={16: a.throughput[16][:1]}) for a in one_round.result.arms)
    one_round = replace(one_round, result=replace(one_round.result, arms=arms))
    visit_runs = [_run(i, 0.0, label=f"ab decode K round {i}") for i in (11, 12, 13, 14)]
    found = search_baseline([*good, *visit_runs], [URL], [one_round])
    assert found.found is not None and found.found[0].ab_id is None
    assert [(s.ab_id, s.runs) for s in found.skipped] == [(8, 1)]


def test_an_undecided_comparison_is_inconclusive_never_not_slower() -> None:
    base = Baseline((1, 2, 3), "2026-01-01T00:00:00.000Z", None, {16: (1000.0, 1010.0, 990.0)})
    one = compare_to_baseline(base, {16: [100.0]})
    assert one.inconclusive and not one.slower
    assert compare_to_baseline(base, {64: [1.0, 2.0]}).inconclusive  # no level in common
    assert not compare_to_baseline(base, {16: [1000.0, 1001.0, 999.0]}).inconclusive
    assert not compare_to_baseline(base, {16: [600.0, 610.0, 590.0]}).inconclusive  # slower
