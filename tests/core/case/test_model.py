"""The pure case model: targets, verdicts, revert costs, conviction tests, restore plans."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import pytest

from servelab.core.ab.record import AbRunRecord
from servelab.core.case import model
from servelab.core.case.model import (
    RESTORE_FAILED,
    RESTORE_NONE,
    RESTORE_PENDING,
    RESTORE_UNRESOLVED,
    RESTORE_VERIFIED,
    Target,
    case_from_rows,
    check_verdicts,
    parse_target,
    restore_plan,
    restore_status,
    timeline,
)
from servelab.core.case.record import CaseEvent, CaseEvidence, CaseRecord, Resolution, Suspect
from servelab.core.case.revert import (
    conviction_test,
    experiment_values,
    revert_cost,
    revert_value,
    revert_values,
    setting_change,
)
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.ledger.codec import decode, encode
from servelab.core.soak.record import SoakRunRecord, read_soak_run
from servelab.errors import CaseError

K = "SGLANG_SM120_MMA_TARGET_CTAS"

AB_RESULT: dict[str, Any] = {
    "arms": [
        {"label": "256", "value": "256", "throughput": {"64": [100.0, 101.0]}},
        {"label": "512", "value": "512", "throughput": {"64": [112.8, 113.0]}},
    ],
    "comparisons": [
        {
            "concurrency": 96,
            "ratio": 1.057,
            "ci": [1.02, 1.09],
            "verdict": "better",
            "baseline": "256",
            "candidate": "512",
        },
        {
            "concurrency": 64,
            "ratio": 1.128,
            "ci": [1.10, 1.16],
            "verdict": "better",
            "baseline": "256",
            "candidate": "512",
        },
        {
            "concurrency": 80,
            "ratio": 1.012,
            "ci": [0.99, 1.03],
            "verdict": "no significant difference",
            "baseline": "256",
            "candidate": "512",
        },
    ],
    "anomalies": [],
}


def _ab(ab_id: int = 7, result: dict[str, Any] | None = None, knob: str = K) -> AbRunRecord:
    named = {"service": "decode", "knob": knob, "baseline": "256", "candidate": "512"}
    row = {"id": ab_id, "service": "decode", "knob": knob, "result": named | (result or AB_RESULT)}
    return decode(AbRunRecord, {"at": "2026-01-01T00:00:00.000Z", "config": {}, **row})


def _changes(*rows: dict[str, Any]) -> list[KnobChangeRecord]:
    return [decode(KnobChangeRecord, {"at": "2026-01-01T00:00:00.000Z", **r}) for r in rows]


def _soaks(*rows: dict[str, Any]) -> list[SoakRunRecord]:
    return [read_soak_run({"at": "2026-01-01T00:00:00.000Z", **r}) for r in rows]


def test_public_api_is_exported() -> None:
    for name in model.__all__:
        assert hasattr(model, name), name


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"knob:decode/{K}", Target("knob", K, "decode")),
        ("component:proxy", Target("component", "proxy")),
        ("  component:router ", Target("component", "router")),
    ],
)
def test_parse_target_round_trips(text: str, expected: Target) -> None:
    assert parse_target(text) == expected
    assert str(parse_target(text)) == text.strip()


@pytest.mark.parametrize("bad", ["decode/K", "knob:decode", "knob:/K", "component:", "knob:d/1X"])
def test_bad_targets_are_case_errors(bad: str) -> None:
    with pytest.raises(CaseError, match="knob:SERVICE/NAME"):
        parse_target(bad)


def test_check_verdicts_refuses_both_at_once() -> None:
    assert check_verdicts(["knob:decode/K"], ["component:proxy"]) == {
        "knob:decode/K": "exonerated",
        "component:proxy": "convicted",
    }
    with pytest.raises(CaseError, match="both"):
        check_verdicts(["component:proxy"], ["component:proxy"])


def test_revert_cost_inverts_ratio_ci_and_verdict() -> None:
    cost = revert_cost([_ab()], "decode", K, "512", "256")
    assert cost.measured and cost.ab_id == 7
    by_c = {p.concurrency: p for p in cost.points}
    assert [p.concurrency for p in cost.points] == [64, 80, 96]
    assert by_c[64].change == pytest.approx(1 / 1.128 - 1)
    assert by_c[64].change == pytest.approx(-0.1135, abs=1e-3)
    assert by_c[64].ci == pytest.approx((1 / 1.16 - 1, 1 / 1.10 - 1))
    assert by_c[64].verdict == "worse"
    assert by_c[80].verdict == "no significant difference"
    assert cost.worst is not None and cost.worst.concurrency == 64


def test_revert_cost_in_the_measured_direction_is_used_as_is() -> None:
    cost = revert_cost([_ab()], "decode", K, "256", "512")
    assert cost.points[0].change == pytest.approx(0.128)
    assert cost.points[0].verdict == "better"


def test_revert_cost_uses_newest_matching_ab_and_is_unmeasured_without_one() -> None:
    newer = {**AB_RESULT, "comparisons": [{**AB_RESULT["comparisons"][1], "ratio": 1.2}]}
    cost = revert_cost([_ab(3), _ab(9, newer), _ab(11, knob="OTHER")], "decode", K, "512", "256")
    assert cost.ab_id == 9 and cost.points[0].change == pytest.approx(1 / 1.2 - 1)
    assert not revert_cost([_ab()], "decode", K, "512", "128").measured
    assert not revert_cost([], "decode", K, "512", "256").measured
    assert revert_cost([_ab()], "decode", K, None, "256").points == ()


def test_inconclusive_comparison_keeps_no_number() -> None:
    result = {
        "arms": AB_RESULT["arms"],
        "comparisons": [
            {
                "concurrency": 64,
                "ratio": None,
                "ci": [None, None],  # an interval not computed (NaN bounds, written null)
                "verdict": "inconclusive",
                "baseline": "256",
                "candidate": "512",
            }
        ],
    }
    point = revert_cost([_ab(1, result)], "decode", K, "512", "256").points[0]
    assert point.change is None and point.ci is None and point.verdict == "inconclusive"


def test_revert_values_from_recorded_changes() -> None:
    changes = _changes(
        {"id": 1, "service": "decode", "name": K, "old": "256", "new": "512"},
        {"id": 2, "service": "prefill", "name": K, "old": None, "new": "1"},
    )
    assert revert_values(changes, "decode", K) == ("512", "256")
    assert revert_values(changes, "decode", K, to="128") == ("512", "128")
    assert revert_values([], "decode", K, to="256") == (None, "256")
    with pytest.raises(CaseError, match="--to"):
        revert_values([], "decode", K)


def _history(*values: str | None, gap_at: int | None = None, why: str = "ab: arm") -> list[Any]:
    """Changes of decode's knob walking ``values`` in order (one change per step), the first a
    ``knob set`` and the others reasoned ``why``; the change at index ``gap_at`` starts from
    another value (a hand edit before it)."""
    rows = []
    for i, (old, new) in enumerate(pairwise(values)):
        start = "hand" if i == gap_at else old
        reason = "knob set" if i == 0 else why
        rows.append({"id": i + 1, "service": "decode", "name": K, "old": start, "new": new,
                     "reason": reason})  # fmt: skip
    return _changes(*rows)


def _before(history: list[Any], current: str) -> str | None:
    found = setting_change(history, "decode", K, current)
    assert found is not None
    return found.old


def test_the_change_that_set_a_value_leaves_round_trips_and_experiments_out() -> None:
    """Issue 38, the twenty-eighth pass: an A/B's arms and their put-back are a round trip, not
    the change that set the knob; an A/B that keeps an arm set it from the value it found."""
    after_ab = _history("256", "512", "128", "1024", "128", "512")
    assert _before(after_ab, "512") == "256"
    assert _before(_history("256", "512", "128", "1024", "128", "1024"), "1024") == "512"  # kept
    assert _before(_history("256", "512", "128", "1024", why="knob set"), "1024") == "128"
    for why in ("tune 3: arm a", "case 2: test of knob:decode/K, arm suspect, round 1",
                "case test of knob:decode/K: arm revert, round 1", "case 2: bisect probe 1",
                "put back as found: the command failed"):  # fmt: skip
        assert _before(_history("256", "512", "128", "1024", why=why), "1024") == "512", why
    # a hand edit breaks the history: the change after it set the value
    assert _before(_history("256", "512", "128", "512", gap_at=2), "512") == "hand"
    assert setting_change(after_ab, "decode", K, "64") is None
    assert setting_change(after_ab, "prefill", K, "512") is None
    assert experiment_values([], after_ab, "decode", K, current="512") == ("512", "256")
    with pytest.raises(CaseError, match=r"no recorded change set decode/.* \(edited by hand"):
        revert_value(after_ab, "decode", K, "64")
    assert revert_value(after_ab, "decode", K, "64", to="8") == "8"


def test_experiment_values_compare_the_suspected_value_with_its_revert() -> None:
    recorded = _changes({"id": 1, "service": "decode", "name": K, "old": "256", "new": "512"})
    assert experiment_values([], recorded, "decode", K, current="512") == ("512", "256")
    assert experiment_values([], recorded, "decode", K, current="512", to="128") == ("512", "128")
    # reverted under the case already: the value before its first revert against its last value
    mine = _changes(
        {"id": 2, "service": "decode", "name": K, "old": "512", "new": "256", "case_id": 3},
        {"id": 3, "service": "decode", "name": K, "old": "256", "new": "128", "case_id": 3},
    )
    assert experiment_values(mine, recorded, "decode", K, current="128") == ("512", "128")
    with pytest.raises(CaseError, match="both arms"):
        experiment_values([], recorded, "decode", K, current="512", to="512")
    with pytest.raises(CaseError, match="--to"):
        experiment_values([], [], "decode", K, current="512")


def test_conviction_test_reads_soak_knobs() -> None:
    soaks = _soaks(
        {"id": 1, "ok": False, "config": {"knobs": {f"decode/{K}": "512"}}},
        {"id": 2, "ok": False, "config": {"knobs": {K: "256"}}},
        {"id": 3, "ok": True, "config": {}},
    )
    test = conviction_test(soaks, "decode", K, "512", "256")
    assert test.failing_with == (1,) and test.passing_without == () and not test.met
    soaks += _soaks({"id": 4, "ok": True, "config": {"knobs": {K: "256"}}})
    assert conviction_test(soaks, "decode", K, "512", "256").met


def _case(status: str = "resolved", verdict: str | None = "exonerated", events: Any = ()) -> Any:
    case_row = {
        "id": 3,
        "title": "agentic hang",
        "at": "2026-01-01T00:00:00.000Z",
        "status": status,
        "root_cause": "proxy" if status == "resolved" else None,
        "resolved_at": "2026-01-03T00:00:00.000Z" if status == "resolved" else None,
    }
    suspects = [
        {
            "target": f"knob:decode/{K}",
            "reason": "latest change",
            "at": "2026-01-01T00:01:00.000Z",
            "verdict": verdict,
        }
    ]
    evidence = [
        {"kind": "note", "ref_id": None, "note": "fresh conns ok", "at": "2026-01-01T00:02:00.000Z"}
    ]
    changes = [
        {
            "id": 5,
            "at": "2026-01-02T00:00:00.000Z",
            "service": "decode",
            "name": K,
            "old": "512",
            "new": "256",
            "reason": "suspected",
            "case_id": 3,
        }
    ]
    return case_from_rows(
        decode(CaseRecord, case_row),
        [decode(Suspect, r) for r in suspects],
        [decode(CaseEvidence, r) for r in evidence],
        [decode(CaseEvent, r) for r in events],
        _changes(*changes),
    )


def test_restore_plan_for_an_exonerated_knob_carries_its_cost() -> None:
    case = _case()
    plan = restore_plan(case, [_ab()])
    assert len(plan) == 1
    item = plan[0]
    assert (item.service, item.knob, item.current, item.restore_to) == ("decode", K, "256", "512")
    assert item.change_ids == (5,) and item.case_id == 3
    # the cost shown is the cost of the revert that was made: 512 → 256
    assert item.cost.points[0].change == pytest.approx(1 / 1.128 - 1)
    assert restore_status(case, plan) == RESTORE_PENDING


def test_no_restore_plan_for_convicted_or_unresolved() -> None:
    assert restore_plan(_case(verdict="convicted"), [_ab()]) == []
    assert restore_status(_case(verdict="convicted"), []) == RESTORE_NONE
    open_case = _case(status="open", verdict=None)
    assert restore_plan(open_case) == []
    assert restore_status(open_case, []) == RESTORE_UNRESOLVED


def test_restore_events_move_the_status_and_leave_the_plan() -> None:
    ok = {
        "kind": "restore",
        "at": "2026-01-04T00:00:00.000Z",
        "detail": {"service": "decode", "knob": K, "ok": True, "verified": True, "change_id": 9},
    }
    bad = {**ok, "detail": {**ok["detail"], "ok": False, "verified": False}}
    case = _case(events=[ok])
    # the restore's own knob change (id 9) does not cancel the plan item
    case = model.Case(
        **{
            **case.__dict__,
            "changes": (
                *case.changes,
                KnobChangeRecord(
                    9, "2026-01-04T00:00:00.000Z", "decode", K, "256", "512", "restore", 3
                ),
            ),
        }
    )
    plan = restore_plan(case)
    assert len(plan) == 1
    assert restore_status(case, plan) == RESTORE_VERIFIED
    assert restore_status(_case(events=[bad]), plan) == RESTORE_FAILED


def test_superseded_change_is_flagged() -> None:
    later = _changes({"id": 8, "service": "decode", "name": K, "case_id": None})
    assert restore_plan(_case(), later_changes=later)[0].superseded_by == 8
    assert restore_plan(_case(), later_changes=[])[0].superseded_by is None


def test_timeline_is_in_time_order_with_every_kind() -> None:
    entries = timeline(_case())
    kinds = [e.kind for e in entries]
    assert kinds == ["opened", "suspect", "evidence", "knob_change", "resolved"]
    resolution = entries[-1].data
    assert isinstance(resolution, Resolution)
    assert resolution.verdicts == {f"knob:decode/{K}": "exonerated"}


def test_nan_from_an_uncomputable_interval_is_not_a_number() -> None:
    nan = float("nan")
    result = {"arms": AB_RESULT["arms"], "comparisons": [
        {"concurrency": 64, "ratio": nan, "ci": [nan, nan], "verdict": "inconclusive",
         "confidence": 0.9, "baseline": "256", "candidate": "512"}]}  # fmt: skip
    point = revert_cost([_ab(1, result)], "decode", K, "512", "256").points[0]
    assert point.change is None and point.ci is None and point.confidence == 0.9


def test_a_later_change_that_ended_on_the_same_value_is_not_changed_again_since() -> None:
    """An A/B after the revert visits other values and restores the original: net, no change."""
    ab = _changes(
        {"id": 8, "service": "decode", "name": K, "old": "256", "new": "512", "case_id": None},
        {"id": 9, "service": "decode", "name": K, "old": "512", "new": "256", "case_id": None},
    )
    assert restore_plan(_case(), later_changes=ab)[0].superseded_by is None
    moved = _changes({"id": 10, "service": "decode", "name": K, "old": "256", "new": "128"})
    assert restore_plan(_case(), later_changes=[*ab, *moved])[0].superseded_by == 10


def test_a_restored_knob_is_compared_with_its_restored_value() -> None:
    """Restored 256 → 512 (change 6, this case's), then an A/B that ended on 512: not moved."""
    done = {"kind": "restore", "at": "2026-01-04T00:00:00.000Z",
            "detail": {"service": "decode", "knob": K, "ok": True, "change_id": 6}}  # fmt: skip
    case = _case(events=[done])
    restore = KnobChangeRecord(6, "2026-01-04T00:00:00.000Z", "decode", K, "256", "512", "r", 3)
    case = model.Case(**{**case.__dict__, "changes": (*case.changes, restore)})
    ab = _changes(
        {"id": 7, "service": "decode", "name": K, "old": "512", "new": "256", "case_id": None},
        {"id": 8, "service": "decode", "name": K, "old": "256", "new": "512", "case_id": None},
    )
    (item,) = restore_plan(case, later_changes=[restore, *ab])
    assert item.superseded_by is None and restore_status(case, [item]) == RESTORE_VERIFIED
    (item,) = restore_plan(case, later_changes=[restore, *ab[:1]])
    assert item.superseded_by == 7


def test_an_argument_knob_is_a_target_too() -> None:
    for name in ("--disable-overlap-schedule", "--json-model-override-args.index_topk"):
        target = parse_target(f"knob:decode/{name}")
        assert (target.kind, target.service, target.name) == ("knob", "decode", name)
        assert str(target) == f"knob:decode/{name}"
    with pytest.raises(CaseError, match="knob:decode/--disable-overlap-schedule"):
        parse_target("knob:decode/-x")


def test_a_timeline_entrys_typed_data_encodes_as_the_dict_it_replaced() -> None:
    """``case show --json`` prints each entry's data: key for key, in order, what the timeline
    built as a dict before it was typed."""
    old = [
        {"title": "agentic hang"},
        {"target": f"knob:decode/{K}", "reason": "latest change"},
        {"kind": "note", "ref_id": None, "note": "fresh conns ok"},
        {"id": 5, "service": "decode", "name": K, "old": "512", "new": "256",
         "reason": "suspected"},
        {"root_cause": "proxy", "verdicts": {f"knob:decode/{K}": "exonerated"}},
    ]  # fmt: skip
    entries = timeline(_case())
    assert [json.dumps(encode(e.data)) for e in entries] == [json.dumps(d) for d in old]


def test_a_recorded_events_detail_is_its_timeline_entrys_data_as_stored() -> None:
    """A resolution kept as a ``resolved`` event, or any other recorded event: its stored detail
    (the renderer reads it by its kind); the case's own resolution is typed."""
    stored = {"root_cause": "the knob", "superseded_at": "2026-01-03T00:00:00.000Z",
              "verdicts": {f"knob:decode/{K}": "convicted"}}  # fmt: skip
    note = {"reason": "by hand", "refused": []}
    events = [{"kind": "resolved", "at": "2026-01-02T12:00:00.000Z", "detail": stored},
              {"kind": "override", "at": "2026-01-02T13:00:00.000Z", "detail": note}]  # fmt: skip
    entries = timeline(_case(events=events))
    assert [e.data for e in entries if e.at.startswith("2026-01-02T1")] == [stored, note]
    assert entries[-1].data == Resolution("proxy", {f"knob:decode/{K}": "exonerated"})
