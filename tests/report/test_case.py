"""Why a revert or a restore did not verify, worded from the data ops returns and the ledger keeps;
their ``--json`` documents; and ``ledger export`` with every check's reason (a real ledger file)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from servelab.core.case.contract import RestoreOutcome, RevertOutcome, RevertPreview
from servelab.core.case.model import EventOutcome, RestoreEvent, RevertEvent, TimelineEntry
from servelab.core.case.record import CaseEvent, CaseRecord
from servelab.core.case.revert import ConvictionTest, RevertCost
from servelab.core.deploy.record import DeploymentRecord
from servelab.core.knobs.contract import KnobChange
from servelab.core.knobs.rules import LiveVerdict
from servelab.core.ledger.codec import decode, encode
from servelab.core.verify.checks import Check, CheckCode, KnobLive, Layer
from servelab.core.verify.contract import VerifyReport
from servelab.core.verify.e2e import E2EProbe, RequestTiming
from servelab.core.verify.health import HealthProbe
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.report.case import (
    NOT_CONFIRMED,
    event_error,
    restore_error,
    restore_json,
    revert_error,
    revert_json,
    why_failed,
)
from servelab.report.docs import describe_timeline_entry
from servelab.report.ledger import ledger_json_chunks

K = "SGLANG_SM120_MMA_TARGET_CTAS"
_DIFFERS = KnobLive(42, "pid record", K, "512", "256", LiveVerdict.DIFFERS)
_READY = HealthProbe("/health", 200, 0.01)
_E2E = E2EProbe.of("m", RequestTiming(502, None, 0.1, 0, 512, "http 502", "bad gateway"), None)
_SENTENCE = "live decode: differs: file 512, live 256 (restart needed)"


def _report(*checks: Check, vid: int | None = 3) -> VerifyReport:
    return VerifyReport(list(checks), "h", tuple(Layer), ["decode"], 0.1, vid)


def test_why_failed_reads_the_typed_report() -> None:
    bad = Check("decode", False, CheckCode.LIVE_DIFFERS, _DIFFERS)
    report = _report(Check("decode", True, CheckCode.HEALTH_READY, _READY), bad)
    assert why_failed(report) == _SENTENCE
    assert why_failed(None, "restart of decode failed: exit 3") == (
        "restart of decode failed: exit 3"
    )
    assert why_failed(None) == NOT_CONFIRMED == "the knob's live value was not confirmed"
    e2e = Check("router", False, CheckCode.E2E_FAILED, _E2E)
    assert why_failed(_report(bad, e2e)) == (
        f"{_SENTENCE}; e2e router: chat completion failed: HTTP 502: bad gateway"
    )


def _preview() -> RevertPreview:
    cost, test = RevertCost("decode", K, "512", "256"), ConvictionTest(K, "512", "256")
    return RevertPreview(1, f"knob:decode/{K}", "decode", K, "512", "256", cost, test)


def _change() -> KnobChange:
    return KnobChange("decode", K, "512", "256", True, "/b", "/e", True, True, "512", None, 4)


def test_a_revert_that_did_not_verify_says_why_in_json_and_words() -> None:
    bad = Check("decode", False, CheckCode.LIVE_DIFFERS, _DIFFERS)
    outcome = RevertOutcome(_preview(), _change(), [], _report(bad), "512", event_id=7)
    assert not outcome.ok and outcome.failed_checks == [bad]
    assert revert_error(outcome) == _SENTENCE
    doc = json.loads(revert_json(outcome))
    assert doc["error"] == _SENTENCE and doc["ok"] is False and doc["failure"] is None
    (check,) = doc["verification"]["checks"]
    assert check["code"] == "live.differs"
    assert check["detail"] == "differs: file 512, live 256 (restart needed)"
    stopped = RevertOutcome(_preview(), _change(), [], None, None, failure="restart failed: x")
    assert revert_error(stopped) == "restart failed: x"
    assert json.loads(revert_json(stopped))["verification"] == {
        "ok": False, "checks": [], "error": "restart failed: x"
    }  # fmt: skip
    matched = replace(_DIFFERS, file="256", verdict=LiveVerdict.MATCH)
    good = Check("decode", True, CheckCode.LIVE_MATCH, matched)
    verified = RevertOutcome(_preview(), _change(), [], _report(good), "256")
    assert (
        verified.ok
        and revert_error(verified) is None
        and json.loads(revert_json(verified))["error"] is None
    )


def test_a_restore_that_did_not_verify_says_why_per_item() -> None:
    bad = Check("decode", False, CheckCode.LIVE_DIFFERS, _DIFFERS)
    item = RestoreEvent("decode", K, "256", "512", "256", 5, 3, False, failed=(bad,))
    outcome = RestoreOutcome(1, [item], [], _report(bad), status="restore failed")
    assert restore_error(outcome) == _SENTENCE
    doc = json.loads(restore_json(outcome))
    assert doc["error"] == _SENTENCE and doc["items"][0]["error"] == _SENTENCE
    assert doc["items"][0]["verified"] is False
    assert doc["items"][0]["failed_checks"][0]["detail"].startswith("differs: file 512")
    assert doc["verification"]["checks"][0]["code"] == "live.differs"


def _stored(detail: object) -> EventOutcome:
    """A recorded revert's or restore's detail, read as the outcome it says."""
    return decode(EventOutcome, detail)


def test_a_recorded_event_reads_its_reason_old_and_new() -> None:
    failed = (Check("decode", False, CheckCode.LIVE_DIFFERS, _DIFFERS),)
    new = RevertEvent("decode", K, "512", "256", 4, 3, False, failed=failed)
    assert event_error(_stored(encode(new))) == event_error(new) == _SENTENCE
    older = {"ok": False, "error": "live decode: the sentence it stored"}
    assert event_error(_stored(older)) == "live decode: the sentence it stored"
    assert event_error(_stored({"ok": False})) == NOT_CONFIRMED
    assert event_error(_stored({"ok": True, "error": None})) is None
    stopped = RestoreEvent("decode", K, "256", "512", None, 5, None, False, error="timed out")
    assert event_error(_stored(encode(stopped))) == event_error(stopped) == "timed out"
    line = describe_timeline_entry(TimelineEntry("t", "revert", encode(new)))
    assert line == f"revert decode {K} → 256: FAILED ({_SENTENCE})"


def test_ledger_export_words_every_check(tmp_path: Path) -> None:
    bad = Check("decode", False, CheckCode.LIVE_DIFFERS, _DIFFERS)
    ready = Check("decode", True, CheckCode.HEALTH_READY, _READY)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        vid = ledger.record_verification(spec_hash="h", ok=False, checks=[ready, bad])
        restart = {"ok": False, "verification": encode(_report(bad)), "steps": []}
        ledger.add(
            DeploymentRecord(
                id=0, at=NOW, name="pd", spec_hash="h", action="restart", detail=restart
            )
        )
        cid = ledger.add(CaseRecord(id=0, at=NOW, title="hang", status="open"))
        event = RevertEvent("decode", K, "512", "256", None, vid, False, failed=(bad,))
        ledger.add(CaseEvent(at=NOW, case_id=cid, kind="revert", detail=encode(event)))
        ledger.add(
            CaseEvent(at=NOW, case_id=cid, kind="revert", detail={"ok": False, "error": "old"})
        )
        doc = json.loads("".join(ledger_json_chunks(ledger.snapshot())))
        raw = ledger.export()
    checks = doc["verifications"][0]["checks"]
    assert [c["detail"] for c in checks] == ["/health 200 in 10 ms", _SENTENCE.split(": ", 1)[1]]
    assert [c["code"] for c in checks] == ["health.ready", "live.differs"]
    assert "detail" not in raw["verifications"][0]["checks"][1]  # stored: the code and the data
    shown = doc["deployments"][0]["detail"]["verification"]["checks"][0]
    assert shown["detail"] == "differs: file 512, live 256 (restart needed)"
    new, old = (e["detail"] for e in doc["cases"][0]["events"])
    assert new["error"] == _SENTENCE and new["failed_checks"][0]["detail"].startswith("differs")
    assert old["error"] == "old" and "failed_checks" not in old
