"""The planner of ``servelab investigate`` (pure): the suspects from the ledger's changes since
the last good point, where a layer sits, and the next action given what is decided."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servelab.core.investigate.plan import (
    Bisect,
    ComponentTest,
    Finish,
    GoodState,
    KnobTest,
    ListSuspects,
    Localize,
    Reproduce,
    Resolve,
    after_decide,
    next_action,
    record_decided,
    side_of,
    suspects_since,
)
from servelab.core.investigate.state import (
    Decided,
    Ending,
    InvestigationState,
    Side,
    Stage,
    SuspectChange,
    Symptom,
)
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.ledger.codec import decode, encode

K = "SGLANG_SM120_MMA_TARGET_CTAS"


def _change(i: int, at: str, name: str, old: str | None, new: str | None,
            case_id: int | None = None) -> KnobChangeRecord:  # fmt: skip
    return KnobChangeRecord(id=i, at=at, service="decode", name=name, old=old, new=new,
                            reason="x", case_id=case_id)  # fmt: skip


def test_a_knob_reverted_on_suspicion_is_a_suspect_at_the_value_the_operator_set() -> None:
    changes = [
        _change(1, "2026-01-01T00:00:00.000Z", K, "128", "256"),  # before the good point
        _change(2, "2026-01-02T00:00:00.000Z", K, "256", "512"),  # the tuning
        _change(3, "2026-01-03T00:00:00.000Z", K, "512", "256", case_id=7),  # reverted
        _change(4, "2026-01-04T00:00:00.000Z", K, "256", "999"),  # the investigation's own
    ]
    (s,) = suspects_since(changes, since_at="2026-01-01T12:00:00.000Z", upto_id=3)
    assert (s.good, s.suspected, s.current, s.reverted) == ("256", "512", "256", True)
    assert s.change_ids == (2, 3) and s.target == f"knob:decode/{K}"
    assert s.ab_id is None and s.bought == ()  # no A/B recorded: nothing measured


def test_changes_in_order_of_first_change_and_a_change_undone_is_no_suspect() -> None:
    changes = [
        _change(1, "2026-01-02T00:00:00.000Z", "B", None, "1"),
        _change(2, "2026-01-02T00:00:01.000Z", "A", "x", "y"),
        _change(3, "2026-01-02T00:00:02.000Z", "C", "on", "off"),
        _change(4, "2026-01-02T00:00:03.000Z", "C", "off", "on"),  # changed back by hand
    ]
    found = suspects_since(changes, since_at=None, upto_id=4)
    assert [(s.knob, s.good, s.suspected, s.reverted) for s in found] == [
        ("B", None, "1", False), ("A", "x", "y", False)]  # fmt: skip


def test_a_case_s_own_changes_are_never_an_operator_s() -> None:
    changes = [
        _change(1, "2026-01-02T00:00:00.000Z", "A", "x", "y"),
        _change(2, "2026-01-02T00:00:01.000Z", "A", "y", "x", case_id=3),  # reverted
        KnobChangeRecord(id=3, at="2026-01-02T00:00:02.000Z", service="decode", name="A",
                         old="x", new="y", reason="case 3: test of knob:decode/A, arm suspect"),
        KnobChangeRecord(id=4, at="2026-01-02T00:00:03.000Z", service="decode", name="A",
                         old="y", new="x", reason="case test: left as found"),
        KnobChangeRecord(id=5, at="2026-01-02T00:00:04.000Z", service="decode", name="B",
                         old="1", new="2", reason="case bisect: left as found"),
    ]  # fmt: skip
    (s,) = suspects_since(changes, since_at=None, upto_id=5)
    assert (s.knob, s.good, s.suspected, s.current, s.reverted) == ("A", "x", "y", "x", True)


def _state(**kw: object) -> InvestigationState:
    return replace(InvestigationState(1, Symptom.HANG), **kw)  # type: ignore[arg-type]


def _s(name: str, *, reverted: bool = False) -> SuspectChange:
    return SuspectChange("decode", name, "a", "b", "a" if reverted else "b", reverted=reverted)


def test_the_stages_in_order() -> None:
    assert next_action(_state()) == Reproduce()
    assert next_action(_state(stage=Stage.LOCALIZE)) == Localize()
    assert next_action(_state(stage=Stage.SUSPECTS)) == ListSuspects()
    assert next_action(_state(stage=Stage.RESOLVE)) == Resolve()
    done = _state(stage=Stage.DONE, ending=Ending.NOT_REPRODUCED)
    assert next_action(done) == Finish(Ending.NOT_REPRODUCED)


def test_outside_the_proxy_first_then_each_knob_only_as_far_as_needed() -> None:
    knobs = (_s("K1", reverted=True), _s("K2"))
    state = _state(stage=Stage.DECIDE, side=Side.OUTSIDE, component="proxy", suspects=knobs)
    assert next_action(state) == ComponentTest("component:proxy")
    state = record_decided(state, [Decided("component:proxy", "convicted", "case test")])
    assert next_action(state) == KnobTest(knobs[0])  # never a bisection behind a guilty proxy
    state = record_decided(state, [Decided(knobs[0].target, "exonerated", "case test")])
    assert next_action(state) == KnobTest(knobs[1])
    state = record_decided(state, [Decided(knobs[1].target, "exonerated", "case test")])
    assert next_action(state) == Resolve()
    ended = after_decide(state)
    assert ended.stage is Stage.RESOLVE and ended.ending is Ending.RESOLVED
    assert ended.convicted == ("component:proxy",)
    assert ended.exonerated == (knobs[0].target, knobs[1].target)


def test_inside_one_change_is_tested_several_are_bisected() -> None:
    one = _state(stage=Stage.DECIDE, side=Side.INSIDE, suspects=(_s("K1"),))
    assert next_action(one) == KnobTest(_s("K1"))
    six = tuple(_s(f"K{i}") for i in range(6))
    many = _state(stage=Stage.DECIDE, side=Side.INSIDE, suspects=six)
    assert next_action(many) == GoodState(six)  # ddmin assumes the good state good: checked
    many = replace(many, good_fails=False)
    assert next_action(many) == Bisect(six)
    answers = _state(stage=Stage.DECIDE, side=Side.INSIDE, suspects=six, symptom=Symptom.ANSWERS)
    assert next_action(answers) == Bisect(six)  # its references are the good state's answers
    bisected = record_decided(replace(many, bisect_id=9), [
        Decided(s.target, "convicted" if s.knob == "K1" else "exonerated", "bisect")
        for s in six])  # fmt: skip
    assert next_action(bisected) == Resolve()
    assert after_decide(bisected).convicted == ("knob:decode/K1",)


def test_a_bisection_done_is_never_run_again() -> None:
    two = (_s("K1"), _s("K2"))
    state = _state(stage=Stage.DECIDE, side=Side.INSIDE, suspects=two, bisect_id=3,
                   good_fails=False)  # fmt: skip
    assert next_action(state) == Resolve()  # what it left undecided stays undecided


def test_a_good_state_that_fails_too_is_never_bisected() -> None:
    two = (_s("K1"), _s("K2"))
    state = _state(stage=Stage.DECIDE, side=Side.INSIDE, suspects=two, good_fails=True)
    assert next_action(state) == Resolve()  # no change explains it: none is convicted
    assert after_decide(state).ending is Ending.UNEXPLAINED


def test_nothing_convicted_ends_unexplained_and_nothing_to_decide_resolves() -> None:
    state = _state(stage=Stage.DECIDE, side=Side.INSIDE, layer="engine_wedge")
    assert next_action(state) == Resolve()
    assert after_decide(state).ending is Ending.UNEXPLAINED
    k = _s("K1")
    cleared = record_decided(replace(state, suspects=(k,)),
                             [Decided(k.target, "exonerated", "case test")])  # fmt: skip
    assert after_decide(cleared).convicted == ()


def test_a_component_that_is_cleared_leaves_the_knobs_to_a_bisection() -> None:
    two = (_s("K1"), _s("K2"))
    state = _state(stage=Stage.DECIDE, side=Side.OUTSIDE, component="proxy", suspects=two)
    state = record_decided(state, [Decided("component:proxy", "exonerated", "case test")])
    assert next_action(state) == GoodState(two)


def test_the_newest_verdict_counts() -> None:
    state = record_decided(_state(), [Decided("t", "inconclusive", "case test"),
                                      Decided("t", "convicted", "case test")])  # fmt: skip
    assert state.outcome_of("t") == "convicted" and state.outcome_of("u") is None


@pytest.mark.parametrize(
    ("layer", "component", "side"),
    [("client_proxy", "proxy", Side.OUTSIDE), ("client_proxy", None, Side.INSIDE),
     ("decode_transfer", "proxy", Side.INSIDE), ("engine_wedge", None, Side.INSIDE),
     (None, "proxy", Side.INSIDE)],
)  # fmt: skip
def test_where_a_layer_sits(layer: str | None, component: str | None, side: Side) -> None:
    assert side_of(layer, component=component) is side


def test_the_state_round_trips_through_the_codec() -> None:
    verdict = Decided("component:proxy", "convicted", "case test", 4, 5, 0.03)
    state = _state(stage=Stage.DECIDE, side=Side.OUTSIDE, component="proxy",
                   suspects=(_s("K1", reverted=True),), decided=(verdict,))  # fmt: skip
    assert decode(InvestigationState, encode(state)) == state
    assert encode(state)["stage"] == "decide" and encode(state)["symptom"] == "hang"
