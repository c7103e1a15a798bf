"""The ``--json`` documents of ``case show``/``resolve``, ``case list``, ``case test`` and ``case
bisect``, built in report/ from ops' typed outcomes: the same keys, in the same order, with the
same values as the ``to_json`` methods ops used to write by hand (written out here as they were)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from servelab.core.bench.contract import BenchConfig
from servelab.core.case.bisect import Bisected, Change, ProbeOutcome, next_step, record_probe
from servelab.core.case.bisect import start_bisect as start
from servelab.core.case.experiment import (
    ARM_REVERT,
    ARM_SUSPECT,
    ArmTally,
    ExperimentRecord,
    ExperimentVisit,
    decide,
    tally,
)
from servelab.core.case.model import TimelineEntry
from servelab.core.case.probe import (
    ARM_BAD,
    ARM_PROBE,
    BisectConclusion,
    BisectRecord,
    ProbeRecord,
    bisect_verdicts,
    parse_probe_test,
)
from servelab.core.case.record import CaseEvent
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.ledger.codec import encode
from servelab.core.soak.result import SoakConfig
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.ops.case import case as cases
from servelab.ops.case.bisect import BisectOutcome
from servelab.ops.case.experiment import CaseTestOutcome
from servelab.report.case import (
    bisect_json,
    case_json,
    case_list_json,
    describe_bisected,
    describe_experiment,
    experiment_json,
)

TARGET = "knob:decode/SGLANG_SM120_MMA_TARGET_CTAS"


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "ledger.db") as opened:
        yield opened


def _ordered(doc: Any) -> Any:
    """``doc`` with every object as its list of (key, value) pairs: equal only in the same order."""
    if isinstance(doc, Mapping):
        return [(k, _ordered(v)) for k, v in doc.items()]
    if isinstance(doc, list):
        return [_ordered(v) for v in doc]
    return doc


def _bisection() -> BisectOutcome:
    changes = tuple(Change("decode", f"K{i}", "0", "1") for i in range(3))
    state = start(changes)
    while not isinstance(step := next_step(state), Bisected):
        state = record_probe(state, ProbeOutcome.BAD if 1 in step.indices else ProbeOutcome.GOOD)
    test = parse_probe_test("throughput@C64<1500")
    bench = BenchConfig("http://127.0.0.1:8000", concurrencies=(64,), repeat=2)
    begun = BisectRecord(1, changes, test, "2026-03-01T10:00:00Z", "now", 3, bench=bench)
    probe = ProbeRecord(1, 40, 1, (0, 1), ProbeOutcome.BAD, 1, ArmTally(ARM_BAD, None, 3, 3),
                        ArmTally(ARM_PROBE, None, 3, 3))  # fmt: skip
    end = BisectConclusion(1, 40, step, bisect_verdicts(changes, step), 12, 80.5)
    return BisectOutcome(40, begun, (probe, probe), end, 41, 42, ("0", None, "1"))


def test_bisect_json_is_the_outcome_as_it_was_written_by_hand() -> None:
    outcome = _bisection()
    by_hand = {"bisect_id": outcome.bisect_id, "start": encode(outcome.start),
               "probes": [encode(p) for p in outcome.probes],
               "conclusion": encode(outcome.conclusion), "conclusion_id": outcome.conclusion_id,
               "evidence_id": outcome.evidence_id, "left": list(outcome.left)}  # fmt: skip
    summary = describe_bisected(outcome.start, outcome.conclusion)
    doc = json.loads(bisect_json(outcome))
    assert _ordered(doc) == _ordered(json.loads(json.dumps({**by_hand, "summary": summary})))
    assert doc["left"] == ["0", None, "1"] and doc["start"]["bench"]["repeat"] == 2
    assert doc["start"]["bench"] == encode(outcome.start.bench)


def test_experiment_json_is_the_record_and_its_ids_then_words() -> None:
    visits = (ExperimentVisit(0, ARM_SUSPECT, "512", 3, 3, 7, 11, 4.2),
              ExperimentVisit(0, ARM_REVERT, "256", 3, 0, 8, 12, 3.9))  # fmt: skip
    suspect, revert = tally(visits, ARM_SUSPECT, "512"), tally(visits, ARM_REVERT, "256")
    record = ExperimentRecord(
        case_id=1, target=TARGET, suspect_value="512", revert_value="256", rounds=1,
        workload_soak_id=3, decision=decide(suspect, revert), suspect=suspect, revert=revert,
        visits=visits, found="512", left="512", elapsed_s=8.1, workload=SoakConfig(sessions=3),
    )  # fmt: skip
    doc = json.loads(experiment_json(CaseTestOutcome(record, 7, 8)))
    head = {**encode(record), "event_id": 7, "evidence_id": 8}
    assert list(doc)[: len(head)] == list(head)
    assert list(doc)[len(head) :] == ["summary", "rule_text", "load_text"]
    assert _ordered({k: doc[k] for k in head}) == _ordered(json.loads(json.dumps(head)))
    assert doc["summary"] == describe_experiment(record) and doc["load_text"] is None


def _entry_by_hand(entry: TimelineEntry) -> dict[str, Any]:
    data = dict(entry.data) if isinstance(entry.data, Mapping) else encode(entry.data)
    return {"at": entry.at, "kind": entry.kind, "data": data}


def test_case_show_and_list_json_are_the_view_as_it_was_written_by_hand(ledger: Ledger) -> None:
    cid = cases.open_case(ledger, "hang")
    cases.add_suspect(ledger, cid, TARGET, "latest change")
    cases.add_evidence(ledger, cid, "note", None, "fresh ok")
    knob = TARGET.rsplit("/", 1)[1]
    older = {"service": "decode", "knob": knob, "from": "512", "to": "256", "ok": True}
    ledger.add(KnobChangeRecord(0, NOW, "decode", knob, "512", "256", case_id=cid))
    ledger.add(CaseEvent(at=NOW, case_id=cid, kind="revert", detail=older))
    view = cases.resolve_case(ledger, cid, "the proxy", exonerate=[TARGET])
    by_hand = {
        **encode(view.case),
        "timeline": [_entry_by_hand(e) for e in view.timeline],
        "restore_plan": [encode(i) for i in view.plan],
        "restore_status": view.restore_status,
    }
    doc = json.loads(case_json(view))
    assert _ordered(doc) == _ordered(json.loads(json.dumps(by_hand)))
    assert [e["kind"] for e in doc["timeline"]][:3] == ["opened", "suspect", "evidence"]
    assert doc["restore_plan"] and doc["restore_status"] == view.restore_status
    listed = json.loads(case_list_json(cases.list_cases(ledger)))
    c = view.case
    assert _ordered(listed) == _ordered([
        {"id": c.id, "title": c.title, "status": c.status, "root_cause": c.root_cause,
         "opened_at": c.opened_at, "restore_status": view.restore_status}
    ])  # fmt: skip
    assert listed[0]["root_cause"] == "the proxy" and listed[0]["status"] == "resolved"
