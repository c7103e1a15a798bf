"""The load an answers test reached, and the rule that a test below the load cannot clear."""

from __future__ import annotations

import pytest

from servelab.core.case.bisect import ProbeOutcome
from servelab.core.case.experiment import (
    ARM_REVERT,
    ARM_SUSPECT,
    CONVICTED,
    EXONERATED,
    INCONCLUSIVE,
    NOT_SHOWN,
    Decision,
    ExperimentRecord,
    ExperimentVisit,
)
from servelab.core.case.load import (
    RULE_LOAD_NOT_REACHED,
    arm_load,
    case_reference,
    check_load,
    client_load,
    engine_load,
    guard,
    guard_probe,
    probe_reference,
    seen_at,
)
from servelab.core.case.probe import ARM_BAD, ARM_PROBE, ProbeRecord, ProbeVisit
from servelab.core.case.reached import LoadReference, LoadSource, ReachedLoad, ReferenceSource
from servelab.core.case.record import CaseEvent, CaseEvidence
from servelab.core.ledger.codec import encode
from servelab.core.load.records import RequestRecord

GAUGE = "sglang:num_running_reqs"


def _reached(peak: float, median: float | None = None) -> ReachedLoad:
    return ReachedLoad(LoadSource.ENGINE, peak, peak if median is None else median, 5, GAUGE)


def _visit(arm: str, failed: int, reached: ReachedLoad | None) -> ExperimentVisit:
    return ExperimentVisit(0, arm, "1", 21, failed, None, None, 1.0, reached)


def test_engine_load_reads_the_loaded_phase_only() -> None:
    got = engine_load([0, 0, 3, 9, 8, 0, 7, 0, 0], GAUGE)
    assert got == ReachedLoad(LoadSource.ENGINE, 9, 7, 5, GAUGE)
    assert engine_load([0, 0, 0], GAUGE) is None and engine_load([], GAUGE) is None


def test_client_load_counts_what_each_request_met_in_flight() -> None:
    ms = 1_000_000
    records = [RequestRecord(0, 0, sent_ns=1 * ms, end_ns=10 * ms),
               RequestRecord(1, 0, sent_ns=2 * ms, end_ns=5 * ms),
               RequestRecord(2, 0, sent_ns=5 * ms, end_ns=12 * ms),  # the slot of #1, freed at 5
               RequestRecord(3, 0, sent_ns=6 * ms, end_ns=None),  # never ended: still in flight
               RequestRecord(4, 0, sent_ns=0, end_ns=None),  # never sent
               RequestRecord(5, 0, sent_ns=1 * ms, end_ns=2 * ms, warmup=True)]  # fmt: skip
    got = client_load(records)
    assert got is not None and got.source is LoadSource.CLIENT
    assert (got.peak, got.median, got.samples) == (3, 2, 4)  # met 1, 2, 2, 3
    assert client_load([]) is None


def test_an_arm_reached_the_least_of_its_visits_peaks() -> None:
    visits = [_visit(ARM_SUSPECT, 0, _reached(30, 20)), _visit(ARM_REVERT, 0, _reached(2)),
              _visit(ARM_SUSPECT, 0, _reached(12, 10))]  # fmt: skip
    got = arm_load(visits, ARM_SUSPECT)
    assert got is not None and (got.peak, got.median, got.samples) == (12, 15, 10)
    assert got.source is LoadSource.ENGINE and got.series == GAUGE
    assert arm_load([*visits, _visit(ARM_SUSPECT, 0, None)], ARM_SUSPECT) is None
    client = ReachedLoad(LoadSource.CLIENT, 40, 30, 9)
    mixed = arm_load([visits[0], _visit(ARM_SUSPECT, 0, client)], ARM_SUSPECT)
    assert mixed is not None and mixed.source is LoadSource.CLIENT and mixed.peak == 30


def _rows(eid: int, event: int, kind: str, record: object) -> tuple[CaseEvent, CaseEvidence]:
    return (CaseEvent(kind, "t", encode(record), event, 1),
            CaseEvidence(kind, event, None, "t", eid, 1))  # fmt: skip


def test_the_reference_is_the_least_load_wrong_answers_were_seen_at() -> None:
    earlier = ExperimentRecord(visits=(
        _visit(ARM_SUSPECT, 3, _reached(40)), _visit(ARM_SUSPECT, 2, _reached(30)),
        _visit(ARM_SUSPECT, 0, _reached(8)),  # no wrong answer: says nothing of the fault
        _visit(ARM_REVERT, 5, _reached(4)),  # the revert arm's wrong answers are not the fault's
        _visit(ARM_SUSPECT, 4, None)))  # fmt: skip
    probe = ProbeRecord(visits=(
        ProbeVisit(arm=ARM_BAD, units=21, failed=4, reached=_reached(24)),
        ProbeVisit(arm=ARM_PROBE, units=21, failed=6, reached=_reached(3))))  # fmt: skip
    x_event, x_evidence = _rows(7, 70, ExperimentRecord.KIND, earlier)
    p_event, p_evidence = _rows(9, 90, ProbeRecord.KIND, probe)
    assert seen_at([x_event], [x_evidence]) == [(40, 7), (30, 7)]
    got = case_reference([x_event, p_event], [x_evidence, p_evidence], 64)
    assert got == LoadReference(24, ReferenceSource.CASE, 9)  # the bisection's bad arm
    assert case_reference([x_event], [x_evidence], 64) == LoadReference(30, ReferenceSource.CASE, 7)
    assert case_reference([x_event], [], 64).source is ReferenceSource.REQUESTED  # no evidence row
    none_seen = ExperimentRecord(visits=(_visit(ARM_SUSPECT, 0, _reached(64)),))
    rows = _rows(3, 30, ExperimentRecord.KIND, none_seen)
    assert case_reference([rows[0]], [rows[1]], 64) == LoadReference(32, ReferenceSource.REQUESTED)
    assert case_reference([], [], 32) == LoadReference(16, ReferenceSource.REQUESTED)


@pytest.mark.parametrize(
    ("outcome", "peak", "expected"),
    [
        (EXONERATED, 9, NOT_SHOWN),  # below the load: clears nothing
        (INCONCLUSIVE, 9, NOT_SHOWN),
        (CONVICTED, 9, CONVICTED),  # wrong answers convict at any load
        (EXONERATED, 24, EXONERATED),  # reached: exonerates as before
        (EXONERATED, 30, EXONERATED),
        (INCONCLUSIVE, 30, INCONCLUSIVE),
        (EXONERATED, None, NOT_SHOWN),  # unknown load: not reached
    ],
)
def test_a_test_below_the_load_cannot_exonerate(
    outcome: str, peak: float | None, expected: str
) -> None:
    reference = LoadReference(24, ReferenceSource.CASE, 3)
    check = check_load(None if peak is None else _reached(peak), reference)
    assert check.enough is (peak is not None and peak >= 24)
    got = guard(Decision(outcome, "upper_bound_below_effect", 0.5), check)
    assert got.outcome == expected
    assert (got.rule == RULE_LOAD_NOT_REACHED) is (expected == NOT_SHOWN)
    assert got.p_value == 0.5  # the numbers are kept


def _probe_visit(arm: str, failed: int, peak: float | None) -> ProbeVisit:
    reached = None if peak is None else _reached(peak)
    return ProbeVisit(arm=arm, units=21, failed=failed, reached=reached)


FALLBACK = LoadReference(32.0, ReferenceSource.REQUESTED)


def test_a_probe_reference_is_where_its_bad_arm_failed_else_the_case_s() -> None:
    visits = [_probe_visit(ARM_BAD, 3, 40), _probe_visit(ARM_BAD, 1, 28),
              _probe_visit(ARM_BAD, 0, 9), _probe_visit(ARM_PROBE, 2, 5)]  # fmt: skip
    assert probe_reference(visits, FALLBACK) == LoadReference(28.0, ReferenceSource.PROBE)
    clean = [_probe_visit(ARM_BAD, 0, 40), _probe_visit(ARM_PROBE, 0, 40)]
    assert probe_reference(clean, FALLBACK) is FALLBACK


@pytest.mark.parametrize(
    ("probe_peak", "outcome", "want"),
    [
        (30.0, ProbeOutcome.GOOD, ProbeOutcome.GOOD),  # reached where the bad arm failed
        (22.5, ProbeOutcome.GOOD, ProbeOutcome.GOOD),  # three quarters of it: a peak's spread
        (22.0, ProbeOutcome.GOOD, None),
        (6.0, ProbeOutcome.GOOD, None),  # a starved probe arm clears nothing: not decided yet
        (None, ProbeOutcome.GOOD, None),  # its load unknown: the same
        (6.0, ProbeOutcome.BAD, ProbeOutcome.BAD),  # failing as the bad state: at any load
        (6.0, None, None),
    ],
)
def test_a_probe_below_the_load_is_not_shown_good(
    probe_peak: float | None, outcome: ProbeOutcome | None, want: ProbeOutcome | None
) -> None:
    visits = [_probe_visit(ARM_BAD, 4, 30), _probe_visit(ARM_PROBE, 0, probe_peak)]
    decision = Decision(CONVICTED, "significant", 0.001)
    got, ruled, check = guard_probe(outcome, decision, visits, FALLBACK)
    assert got is want
    assert check.reference == LoadReference(30.0, ReferenceSource.PROBE)
    assert check.enough is (probe_peak is not None and probe_peak >= 22.5)
    if outcome is ProbeOutcome.GOOD and want is None:
        assert ruled.rule == RULE_LOAD_NOT_REACHED and ruled.p_value == 0.001
    else:
        assert ruled is decision
