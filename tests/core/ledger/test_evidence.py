"""The ledger's typed records: JSON round trips through the codec, and the older shapes."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from servelab.core.ab import record as ab_record
from servelab.core.ab.compare import Anomaly, Comparison, Verdict
from servelab.core.ab.record import AbRunRecord
from servelab.core.ab.result import AbArm, AbResult
from servelab.core.bench import record as bench_record
from servelab.core.bench.record import BenchRunRecord
from servelab.core.case import record as case_record
from servelab.core.case.model import RestoreEvent, RevertEvent
from servelab.core.case.record import CaseEvent, CaseEvidence, CaseExport, CaseRecord, Suspect
from servelab.core.case.revert import ConcurrencyCost
from servelab.core.deploy import record as deploy_record
from servelab.core.deploy.record import DeploymentRecord
from servelab.core.knobs import record as knob_record
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.knobs.rules import LiveVerdict
from servelab.core.ledger import export, jsonvalues
from servelab.core.ledger.codec import decode, encode
from servelab.core.ledger.export import LedgerExport
from servelab.core.soak import record as soak_record
from servelab.core.soak.record import SoakRunRecord, read_soak_run
from servelab.core.verify import record as verify_record
from servelab.core.verify.checks import Check, CheckCode, KnobLive
from servelab.core.verify.record import (
    CheckRecord,
    StoredCheck,
    UntypedCheck,
    VerificationRecord,
    read_check,
    read_check_row,
)
from servelab.errors import RecordError
from tests.support.soakresult import every_kind_result

AT = "2026-01-01T00:00:00.000Z"
#: A typed check: the knob differs live (file 1, live 512).
DIFFERS = Check(
    "decode", False, CheckCode.LIVE_DIFFERS,
    KnobLive(7, "pid record", "K", "1", "512", LiveVerdict.DIFFERS),
)  # fmt: skip


@pytest.mark.parametrize(
    "module",
    [ab_record, bench_record, case_record, deploy_record, knob_record, soak_record, verify_record,
     export, jsonvalues],
)  # fmt: skip
def test_public_api_is_exported(module: Any) -> None:
    for name in module.__all__:
        assert hasattr(module, name), name


def _ab_result() -> AbResult:
    return AbResult(
        service="decode",
        knob="K",
        baseline="256",
        candidate="512",
        original="512",
        restored=True,
        arms=(AbArm("256", (1, 3), {64: (100.0, 101.0)}), AbArm("512", (2,), {64: (113.0,)})),
        comparisons=(
            Comparison(64, 1.128, (1.1, 1.16), Verdict.BETTER, "256", "512", 0.95, "welch", 2, 1),
        ),
        anomalies=(Anomaly("256", 96, 80, 97.0, 100.0),),
        ab_id=None,
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
    SoakRunRecord(8, AT, False, every_kind_result()),
    CaseRecord(9, AT, "hang", "resolved", "proxy", AT),
    Suspect("knob:decode/K", "latest", AT, "exonerated", AT, id=10, case_id=9),
    CaseEvidence("soak", 8, "stalls", AT, id=11, case_id=9),
    CaseEvent("restore", AT, {"service": "decode", "knob": "K", "ok": True}, id=12, case_id=9),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_every_record_round_trips_through_its_json(record: Any) -> None:
    if isinstance(record, SoakRunRecord):  # through the codec, any age of row
        assert read_soak_run(json.loads(json.dumps(encode(record)))) == record
        return
    assert decode(type(record), json.loads(json.dumps(encode(record), allow_nan=False))) == record


def test_an_ab_result_round_trips() -> None:
    assert decode(AbResult, encode(_ab_result())) == _ab_result()


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
    assert encode(check, StoredCheck) == {**flat, "code": None}
    typed = read_check(encode(DIFFERS, StoredCheck))
    assert typed == DIFFERS and (typed.knob, typed.live) == ("K", "512")


def test_a_check_code_is_told_from_an_older_rows_sentence() -> None:
    coded = read_check_row("live", "decode", False, "live.differs", encode(DIFFERS.data))
    assert coded == DIFFERS and isinstance(coded, Check)
    older = read_check_row("live", "decode", False, "differs: file 1, live 2", {})
    assert older == UntypedCheck("live", "decode", False, "differs: file 1, live 2", {})
    assert read_check(encode(coded, StoredCheck)) == coded
    flat = encode(coded, StoredCheck)
    assert flat["code"] == "live.differs" and "detail" not in flat


def test_older_ab_arms_with_label_and_value_read_as_value() -> None:
    both = {"label": "256", "value": "256", "throughput": {"64": [1.0]}}
    label_only = {"label": "512", "throughput": {}}
    row = {"id": 1, "at": AT, "service": "decode", "knob": "K", "config": {},
           "result": {"service": "decode", "knob": "K", "baseline": "256", "candidate": "512",
                      "arms": [both, label_only]}}  # fmt: skip
    arms = decode(AbRunRecord, row).result.arms
    assert [a.value for a in arms] == ["256", "512"] and arms[0].throughput == {64: (1.0,)}
    assert "label" not in encode(arms[0]) and encode(arms[0])["value"] == "256"


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
    event = decode(
        CaseEvent, {"id": 1, "case_id": 2, "kind": "restore", "at": AT, "detail": detail}
    )
    assert event.ok is expected and "verified" not in event.detail
    assert decode(RestoreEvent, event.detail).ok is expected


def test_partial_rows_read_with_defaults() -> None:
    soak = read_soak_run({"id": 1, "at": AT, "ok": None, "config": {}, "result": {}})
    assert soak.ok is None and soak.result.findings == ()
    assert soak.result.config.knob("decode", "K") is None
    # the first A/Bs' comparisons: six keys (the rest reads as defaults); a ratio not computed
    first = {"concurrency": 64, "ratio": None, "ci": [None, None], "verdict": "inconclusive",
             "baseline": "a", "candidate": "b"}  # fmt: skip
    comp = decode(Comparison, first)
    assert math.isnan(comp.ratio) and all(map(math.isnan, comp.ci))
    assert (comp.verdict, comp.confidence, comp.method, comp.n_baseline) == (
        Verdict.INCONCLUSIVE, 0.95, "", 0
    )  # fmt: skip
    with pytest.raises(RecordError, match="ci"):  # a value that does not fit names its field
        decode(Comparison, {"concurrency": 64, "ratio": 1.0, "ci": "bad", "verdict": "better",
                            "baseline": "a", "candidate": "b"})  # fmt: skip
    run = decode(BenchRunRecord, {"id": 1, "at": AT, "label": None, "config": {}, "summary": {}})
    assert run.n_records == 0 and run.records is None
    assert "records" not in encode(run) and "records_pruned_at" not in encode(run)


def test_soak_knob_prefers_service_qualified_names() -> None:
    row = {
        "id": 1,
        "at": AT,
        "ok": False,
        "result": {},
        "config": {"knobs": {"decode/K": "512", "K": "1", "N": 7}},
    }
    soak = read_soak_run(row)
    knob = soak.result.config.knob
    assert knob("decode", "K") == "512" and knob("prefill", "N") == "7"


def test_revert_and_restore_events_store_one_ok() -> None:
    revert = RevertEvent("decode", "K", "512", "256", 4, 5, True, ("restarted",), None, 7)
    restore = RestoreEvent("decode", "K", "256", "512", "512", 6, 8, False, (4,), (), "e2e")
    assert "verified" not in encode(revert) and encode(revert)["ok"] is True
    assert encode(revert)["from"] == "512" and encode(restore)["value"] == "512"
    costly = RevertEvent("decode", "K", "512", "256", 4, 5, False, (), "e2e", 7,
                         (ConcurrencyCost(64, -0.11, (-0.14, -0.09), "worse"),))  # fmt: skip
    assert decode(RevertEvent, encode(costly)) == costly
    assert decode(RevertEvent, json.loads(json.dumps(encode(revert)))) == revert
    assert decode(RestoreEvent, encode(restore)) == restore


def test_events_keep_their_failed_checks_as_codes_and_data() -> None:
    failed: tuple[CheckRecord, ...] = (DIFFERS,)
    revert = RevertEvent("decode", "K", "512", "256", 4, 5, False, failed=failed)
    restore = RestoreEvent("decode", "K", "256", "512", "1", 6, 8, False, failed=failed)
    assert encode(revert)["failed_checks"][0]["code"] == "live.differs"
    assert encode(revert)["failed_checks"][0]["live"] == "512"  # a check is flat, as ever
    assert decode(RevertEvent, json.loads(json.dumps(encode(revert)))) == revert
    assert decode(RestoreEvent, json.loads(json.dumps(encode(restore)))) == restore
    assert decode(RevertEvent, {"ok": False, "error": "older: a sentence"}).failed == ()


def test_the_whole_export_round_trips() -> None:
    case = CaseExport(9, AT, "hang", "resolved", "proxy", AT, (RECORDS[8],), (RECORDS[9],),
                      (RECORDS[10],))  # fmt: skip
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
    doc = json.loads(json.dumps(encode(export), allow_nan=False))
    assert decode(LedgerExport, doc) == export
    assert doc["cases"][0]["title"] == "hang" and doc["cases"][0]["suspects"][0]["id"] == 10
    assert doc["verifications"][0]["checks"][0]["knob"] == "K"  # a check is flat, as ever
