"""The ledger's typed records: JSON round trips, tolerant reading, and the older shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from servelab.core.case.model import RestoreEvent, RevertEvent
from servelab.core.case.revert import ConcurrencyCost
from servelab.core.knobs.rules import LiveVerdict
from servelab.core.ledger import evidence, jsonvalues, results
from servelab.core.ledger.codec import encode
from servelab.core.ledger.evidence import (
    AbRunRecord,
    BenchRunRecord,
    CaseEvent,
    CaseExport,
    CaseRecord,
    CheckRecord,
    DeploymentRecord,
    Evidence,
    KnobChangeRecord,
    LedgerExport,
    SoakRunRecord,
    Suspect,
    VerificationRecord,
)
from servelab.core.ledger.results import (
    AbArm,
    AbResultRecord,
    AnomalyRecord,
    ComparisonRecord,
    Determinism,
    FailedRequest,
    SoakDocument,
    SoakFinding,
    SoakSessions,
)
from servelab.core.verify.checks import (
    Check,
    CheckCode,
    KnobLive,
    UntypedCheck,
    read_check,
    read_check_row,
)

AT = "2026-01-01T00:00:00.000Z"
#: A typed check: the knob differs live (file 1, live 512).
DIFFERS = Check(
    "decode", False, CheckCode.LIVE_DIFFERS,
    KnobLive(7, "pid record", "K", "1", "512", LiveVerdict.DIFFERS),
)  # fmt: skip


@pytest.mark.parametrize("module", [evidence, results, jsonvalues])
def test_public_api_is_exported(module: Any) -> None:
    for name in module.__all__:
        assert hasattr(module, name), name


def _ab_result() -> AbResultRecord:
    return AbResultRecord(
        service="decode",
        knob="K",
        baseline="256",
        candidate="512",
        original="512",
        restored=True,
        arms=(AbArm("256", {"64": (100.0, 101.0)}, (1, 3)), AbArm("512", {"64": (113.0,)}, (2,))),
        comparisons=(
            ComparisonRecord(
                64,
                1.128,
                (1.1, 1.16),
                "better",
                "256",
                "512",
                0.95,
                {"method": "welch", "n_baseline": 2, "n_candidate": 1},
            ),
        ),
        anomalies=(AnomalyRecord("256", 96, "non_monotonic", {"previous": 80, "drop": 0.03}),),
        ab_id=None,
    )


def _soak_doc() -> SoakDocument:
    finding = SoakFinding(
        "client_proxy",
        0.9,
        "client / proxy",
        "look at the proxy",
        ({"id": "stalls", "supports": True, "text": "2 stalled", "data": {}},),
    )
    return SoakDocument(
        ok=False,
        model="sim",
        elapsed_s=1.5,
        config={"sessions": 2, "knobs": {"decode/K": "512"}},
        targets={"entry_url": "http://127.0.0.1:1"},
        sessions=SoakSessions(2, 1, 5, 6, ({"session": 0, "rounds_done": 3},)),
        stalls=({"session": 1, "round": 2},),
        errors=(FailedRequest(1, 2, 503, "http 503", "overloaded"),),
        determinism=Determinism(reference_ok=True, under_load_ok=True, concurrency=3),
        localized=True,
        observations=({"id": "stalls", "data": {"count": 2}},),
        findings=(finding,),
    )


RECORDS: list[Any] = [
    DeploymentRecord(1, AT, "pd", "abc", "up", {"steps": [{"service": "decode"}]}),
    KnobChangeRecord(2, AT, "decode", "K", "512", "256", "hang", 3, "/b"),
    VerificationRecord(
        4,
        AT,
        "abc",
        False,
        (
            UntypedCheck("live", "decode", False, "differs", {"knob": "K", "live": "512"}),
            DIFFERS,
        ),
    ),
    BenchRunRecord(5, AT, "c64", {"c": [64]}, {"64": {"tok_s": 1.5}}, 2, ({"i": 0}, {"i": 1})),
    BenchRunRecord(6, AT, None, {}, {}, 0, None),
    AbRunRecord(7, AT, "decode", "K", {"repeats": 3}, _ab_result()),
    SoakRunRecord(8, AT, False, {"knobs": {"K": "512"}}, _soak_doc(), _soak_doc().findings),
    CaseRecord(9, AT, "hang", "resolved", "proxy", AT),
    Suspect("knob:decode/K", "latest", AT, "exonerated", AT, id=10, case_id=9),
    Evidence("soak", 8, "stalls", AT, id=11, case_id=9),
    CaseEvent("restore", AT, {"service": "decode", "knob": "K", "ok": True}, id=12, case_id=9),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_every_record_round_trips_through_its_json(record: Any) -> None:
    reader = getattr(type(record), "from_row", None) or type(record).from_json
    assert reader(record.to_json()) == record


@pytest.mark.parametrize(
    "stored", [_ab_result(), _soak_doc(), *_soak_doc().findings], ids=lambda r: type(r).__name__
)
def test_stored_results_round_trip(stored: Any) -> None:
    assert type(stored).from_json(stored.to_json()) == stored


def test_a_check_is_flat_in_json_and_typed_when_read() -> None:
    flat = {
        "layer": "live",
        "service": "decode",
        "ok": True,
        "detail": "x",
        "knob": "K",
        "live": 512,
    }
    check = read_check(flat)
    assert (check.knob, check.live, check.data) == ("K", "512", {"knob": "K", "live": 512})
    assert check.to_json() == {**flat, "code": None}
    typed = read_check(DIFFERS.to_json())
    assert typed == DIFFERS and (typed.knob, typed.live) == ("K", "512")


def test_a_check_code_is_told_from_an_older_rows_sentence() -> None:
    coded = read_check_row("live", "decode", False, "live.differs", encode(DIFFERS.data))
    assert coded == DIFFERS and isinstance(coded, Check)
    older = read_check_row("live", "decode", False, "differs: file 1, live 2", {})
    assert older == UntypedCheck("live", "decode", False, "differs: file 1, live 2", {})
    assert read_check(coded.to_json()) == coded
    assert coded.to_json()["code"] == "live.differs" and "detail" not in coded.to_json()


def test_older_ab_arms_with_label_and_value_read_as_value() -> None:
    both = AbArm.from_json({"label": "256", "value": "256", "throughput": {"64": [1.0]}})
    label_only = AbArm.from_json({"label": "512", "throughput": {}})
    assert (both.value, label_only.value) == ("256", "512")
    assert "label" not in both.to_json() and both.to_json()["value"] == "256"


@pytest.mark.parametrize(
    ("ok", "verified", "expected"),
    [(True, True, True), (True, False, False), (False, True, False), (None, True, True)],
)
def test_older_events_with_ok_and_verified_are_ok_only_if_both(
    ok: bool | None, verified: bool, expected: bool
) -> None:
    detail: dict[str, Any] = {"service": "decode", "knob": "K", "verified": verified}
    if ok is not None:
        detail["ok"] = ok
    event = CaseEvent.from_row(
        {"id": 1, "case_id": 2, "kind": "restore", "at": AT, "detail": detail}
    )
    assert event.ok is expected and "verified" not in event.detail
    assert RestoreEvent.from_json(event.detail).ok is expected


def test_partial_rows_read_with_defaults() -> None:
    soak = SoakRunRecord.from_row({"id": 1, "at": AT, "ok": None, "config": {}, "result": {}})
    assert soak.ok is None and soak.result == SoakDocument() and soak.knob("decode", "K") is None
    comp = ComparisonRecord.from_json({"concurrency": 64, "ratio": None, "ci": "bad"})
    assert (comp.ratio, comp.ci, comp.verdict, comp.confidence) == (
        None,
        None,
        "inconclusive",
        None,
    )
    assert "confidence" not in comp.to_json()


def test_soak_knob_prefers_service_qualified_names() -> None:
    row = {
        "id": 1,
        "at": AT,
        "ok": False,
        "result": {},
        "config": {"knobs": {"decode/K": "512", "K": "1", "N": 7}},
    }
    soak = SoakRunRecord.from_row(row)
    assert soak.knob("decode", "K") == "512" and soak.knob("prefill", "N") == "7"


def test_revert_and_restore_events_store_one_ok() -> None:
    revert = RevertEvent("decode", "K", "512", "256", 4, 5, True, ("restarted",), None, 7)
    restore = RestoreEvent("decode", "K", "256", "512", "512", 6, 8, False, (4,), (), "e2e")
    assert "verified" not in revert.to_json() and revert.to_json()["ok"] is True
    costly = RevertEvent("decode", "K", "512", "256", 4, 5, False, (), "e2e", 7,
                         (ConcurrencyCost(64, -0.11, (-0.14, -0.09), "worse"),))  # fmt: skip
    assert RevertEvent.from_json(costly.to_json()) == costly
    assert RevertEvent.from_json(json.loads(json.dumps(revert.to_json()))) == revert
    assert RestoreEvent.from_json(restore.to_json()) == restore


def test_events_keep_their_failed_checks_as_codes_and_data() -> None:
    failed: tuple[CheckRecord, ...] = (DIFFERS,)
    revert = RevertEvent("decode", "K", "512", "256", 4, 5, False, failed=failed)
    restore = RestoreEvent("decode", "K", "256", "512", "1", 6, 8, False, failed=failed)
    assert revert.to_json()["failed_checks"][0]["code"] == "live.differs"
    assert RevertEvent.from_json(json.loads(json.dumps(revert.to_json()))) == revert
    assert RestoreEvent.from_json(json.loads(json.dumps(restore.to_json()))) == restore
    assert RevertEvent.from_json({"ok": False, "error": "older: a sentence"}).failed == ()


def test_the_whole_export_round_trips() -> None:
    case = CaseExport(RECORDS[7], (RECORDS[8],), (RECORDS[9],), (RECORDS[10],))
    export = LedgerExport(
        3,
        "/l.db",
        (RECORDS[0],),
        (RECORDS[1],),
        (RECORDS[2],),
        (RECORDS[3], RECORDS[4]),
        (RECORDS[5],),
        (RECORDS[6],),
        (case,),
    )
    assert LedgerExport.from_json(export.to_json()) == export
