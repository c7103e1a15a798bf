"""Verdicts that hold: which recorded evidence refuses an exoneration or a conviction."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from servelab.core.case.experiment import (
    ARM_REVERT,
    ARM_SUSPECT,
    NOT_SHOWN,
    ArmTally,
    ExperimentRecord,
    decide,
)
from servelab.core.case.record import CaseEvent, CaseEvidence
from servelab.core.case.verdicts import (
    WHY_EXPERIMENT_CONTRADICTS,
    WHY_NO_SUPPORT,
    WHY_SOAK_EXONERATES,
    WHY_SOAK_PAIR_CONTRADICTS,
    Override,
    Refusal,
    experiments_of,
    incriminating_pairs,
    refusals,
    same_workload,
)
from servelab.core.ledger.codec import encode
from servelab.core.soak.conviction import Exoneration, Standing
from servelab.core.soak.finding import Finding
from servelab.core.soak.record import SoakRunRecord
from servelab.core.soak.replay import Hop
from servelab.core.soak.result import SoakConfig, SoakResult, Targets
from servelab.core.telemetry.layers import Layer

K = "SGLANG_SM120_MMA_TARGET_CTAS"
KNOB = f"knob:decode/{K}"
WORK = {"sessions": 4, "rounds": 6, "connection": "reuse", "idle_timeout_s": 3.0, "seed": 0}


def _soak(
    sid: int, ok: bool, value: str, *, layers: tuple[str, ...] = (), **cfg: Any
) -> SoakRunRecord:
    config = SoakConfig(**{**WORK, **cfg}, knobs={f"decode/{K}": value, "prefill/OTHER": "1"})
    findings = tuple(Finding(Layer(layer), 0.8, (), ()) for layer in layers)
    result = SoakResult(config, Targets("http://p"), findings=findings)
    return SoakRunRecord(sid, f"t{sid}", ok, result)


def _evidence(eid: int, kind: str, ref: int) -> CaseEvidence:
    return CaseEvidence(kind, ref, None, f"e{eid}", eid, 1)


def _experiment(target: str, s: tuple[int, int], r: tuple[int, int]) -> ExperimentRecord:
    suspect, revert = (
        ArmTally(ARM_SUSPECT, "512", s[1], s[0]),
        ArmTally(ARM_REVERT, "256", r[1], r[0]),
    )
    return ExperimentRecord(1, target, "512", "256", 2, 1, decide(suspect, revert), suspect, revert)


def _event(eid: int, record: ExperimentRecord) -> CaseEvent:
    return CaseEvent(ExperimentRecord.KIND, f"x{eid}", encode(record), eid, 1)


def test_a_soak_pair_with_nothing_else_changed_contradicts_an_exoneration() -> None:
    soaks = {1: _soak(1, False, "512"), 2: _soak(2, True, "256")}
    evidence = [_evidence(10, "soak", 1), _evidence(11, "soak", 2)]
    assert incriminating_pairs([(10, soaks[1]), (11, soaks[2])], "decode", K) == [(10, 11)]
    (refused,) = refusals({KNOB: "exonerated"}, [], evidence, soaks)
    assert refused == Refusal(KNOB, "exonerated", WHY_SOAK_PAIR_CONTRADICTS, (10, 11))
    assert refusals({KNOB: "convicted"}, [], evidence, soaks) == []  # and supports a conviction


def test_a_pair_that_changed_something_else_is_no_evidence() -> None:
    base = _soak(1, False, "512")
    for other in (
        _soak(2, True, "256", connection="fresh"),
        _soak(2, True, "256", sessions=8),
    ):
        assert not same_workload(base, other, "decode", K)
    moved = _soak(2, True, "256")
    knobs = {**moved.result.config.knobs, "prefill/OTHER": "2"}
    moved = replace(
        moved, result=replace(moved.result, config=replace(moved.result.config, knobs=knobs))
    )
    assert not same_workload(base, moved, "decode", K)
    soaks = {1: base, 2: _soak(2, True, "256", connection="fresh")}
    evidence = [_evidence(10, "soak", 1), _evidence(11, "soak", 2)]
    assert refusals({KNOB: "exonerated"}, [], evidence, soaks) == []
    (refused,) = refusals({KNOB: "convicted"}, [], evidence, soaks)
    assert refused.why == WHY_NO_SUPPORT and refused.evidence_ids == ()


def test_both_failing_convicts_nothing() -> None:
    soaks = {1: _soak(1, False, "512"), 2: _soak(2, False, "256")}
    evidence = [_evidence(10, "soak", 1), _evidence(11, "soak", 2)]
    assert refusals({KNOB: "exonerated"}, [], evidence, soaks) == []
    assert [r.why for r in refusals({KNOB: "convicted"}, [], evidence, soaks)] == [WHY_NO_SUPPORT]


def test_the_newest_decisive_experiment_decides() -> None:
    convicting = _experiment(KNOB, (6, 6), (0, 6))
    exonerating = _experiment(KNOB, (6, 6), (6, 6))
    unclear = _experiment(KNOB, (2, 2), (2, 2))
    events = [_event(1, convicting), _event(2, exonerating), _event(3, unclear)]
    evidence = [_evidence(20, "experiment", 1), _evidence(21, "experiment", 2),
                _evidence(22, "experiment", 3)]  # fmt: skip
    assert [i for i, _x in experiments_of(events, evidence)] == [20, 21, 22]
    (refused,) = refusals({KNOB: "convicted"}, events, evidence, {})
    assert refused == Refusal(KNOB, "convicted", WHY_EXPERIMENT_CONTRADICTS, (21,))
    assert refusals({KNOB: "exonerated"}, events, evidence, {}) == []
    # the experiment outweighs a soak pair
    soaks = {1: _soak(1, False, "512"), 2: _soak(2, True, "256")}
    pair = [*evidence, _evidence(10, "soak", 1), _evidence(11, "soak", 2)]
    assert refusals({KNOB: "exonerated"}, events, pair, soaks) == []
    (refused,) = refusals({KNOB: "exonerated"}, events[:1], [*pair[:1], *pair[3:]], soaks)
    assert refused.why == WHY_EXPERIMENT_CONTRADICTS and refused.evidence_ids == (20,)


def test_a_component_conviction_needs_a_finding_at_its_layer_or_an_experiment() -> None:
    soaks = {1: _soak(1, False, "512", layers=("client_proxy",))}
    evidence = [_evidence(10, "soak", 1)]
    assert refusals({"component:proxy": "convicted"}, [], evidence, soaks) == []
    (refused,) = refusals({"component:router": "convicted"}, [], evidence, soaks)
    assert refused.why == WHY_NO_SUPPORT
    bypass = _experiment("component:router", (6, 6), (0, 6))
    assert refusals({"component:router": "convicted"}, [_event(5, bypass)],
                    [*evidence, _evidence(12, "experiment", 5)], soaks) == []  # fmt: skip
    assert refusals({"component:proxy": "exonerated"}, [], evidence, soaks) == []


def test_a_soaks_exoneration_refuses_the_conviction_until_a_newer_soak_finds_it() -> None:
    cleared = Exoneration(Layer.ROUTER, Standing.EXONERATED, 0.6, Hop.PAIR, ("matrix.pair",))
    wedged = _soak(1, False, "512", layers=("decode_transfer",))
    wedged = replace(wedged, result=replace(wedged.result, exonerated=(cleared,)))
    soaks, evidence = {1: wedged}, [_evidence(10, "soak", 1)]
    (refused,) = refusals({"component:router": "convicted"}, [], evidence, soaks)
    assert refused == Refusal("component:router", "convicted", WHY_SOAK_EXONERATES, (10,))
    assert refusals({"component:router": "exonerated"}, [], evidence, soaks) == []
    assert refusals({"component:decode": "convicted"}, [], evidence, soaks) == []
    not_shown = replace(cleared, standing=Standing.NOT_SHOWN_NEEDED)
    weaker = replace(wedged, result=replace(wedged.result, exonerated=(not_shown,)))
    (refused,) = refusals({"component:router": "convicted"}, [], evidence, {1: weaker})
    assert refused.why == WHY_NO_SUPPORT  # not shown needed is no exoneration by the matrix
    soaks[2] = _soak(2, False, "512", layers=("router",))
    later = [*evidence, _evidence(11, "soak", 2)]
    assert refusals({"component:router": "convicted"}, [], later, soaks) == []


def test_an_override_carries_the_refusals() -> None:
    refused = Refusal(KNOB, "exonerated", WHY_EXPERIMENT_CONTRADICTS, (3,))
    assert encode(Override("the proxy was fixed meanwhile", (refused,))) == {
        "reason": "the proxy was fixed meanwhile",
        "refused": [{"target": KNOB, "verdict": "exonerated", "why": WHY_EXPERIMENT_CONTRADICTS,
                     "evidence_ids": [3]}],
    }  # fmt: skip


def test_an_answers_test_not_shown_decides_nothing() -> None:
    """A test below the load its wrong answers need (``not_shown``) neither supports nor refuses
    a verdict; the same test at the load (exonerated) refuses a conviction."""
    shown = _experiment(KNOB, (6, 6), (6, 6))
    assert shown.outcome == "exonerated"
    not_shown = replace(shown, decision=replace(shown.decision, outcome=NOT_SHOWN,
                                                rule="load_not_reached"))  # fmt: skip
    evidence = [_evidence(20, ExperimentRecord.KIND, 5)]
    assert refusals({KNOB: "exonerated"}, [_event(5, not_shown)], evidence, {}) == []
    (refused,) = refusals({KNOB: "convicted"}, [_event(5, not_shown)], evidence, {})
    assert refused.why == WHY_NO_SUPPORT  # not the experiment: it showed nothing
    (refused,) = refusals({KNOB: "convicted"}, [_event(5, shown)], evidence, {})
    assert refused == Refusal(KNOB, "convicted", WHY_EXPERIMENT_CONTRADICTS, (20,))
