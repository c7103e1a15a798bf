"""A soak's result as the ledger stores it: the document's numbers, its worded findings, and the
same document read back typed from a real ledger file."""

from __future__ import annotations

import json
from pathlib import Path

from servelab.core.diagnose import CorrectnessIssue, Finding, Observation, Stall
from servelab.core.results import Determinism, FailedRequest
from servelab.io.ledger import Ledger
from servelab.ops import soakrecord
from servelab.ops.soak import SessionOutcome, SoakConfig, SoakResult, Targets
from servelab.report.soak import LAYER_TITLES, render_soak, soak_record

#: The keys of ``servelab soak --json`` (and of the ledger's soak ``result``).
DOC_KEYS = {
    "ok", "soak_id", "model", "elapsed_s", "interrupted", "deadline_hit", "config", "targets",
    "sessions", "stalls", "errors", "correctness", "determinism", "localized", "observations",
    "findings", "failures", "localizations", "start", "undecided",
}  # fmt: skip


def _result() -> SoakResult:
    cfg = SoakConfig(sessions=2, rounds=3, knobs={"decode/K": "512"})
    result = SoakResult(cfg, Targets("http://127.0.0.1:1", "http://127.0.0.1:2"), model="sim")
    result.elapsed_s = 1.23456
    result.sessions = [SessionOutcome(0, rounds_done=3, requests=3), SessionOutcome(1, 1, 2)]
    result.stalls = [Stall(1, 1, 900, 2.5, 1, 0, 0, "head", "idle")]
    result.issues = [CorrectnessIssue("tool_args", 1, 0, "not JSON")]
    result.observations = [Observation("stalls", "entry", False, {"count": 1, "head": 1})]
    result.findings = [Finding("client_proxy", 0.8, ("stalls",), ())]
    result.errors = [FailedRequest(0, 2, 503, "http 503", "overloaded")]
    result.determinism = Determinism(reference_ok=True, sessions_ended_first=True)
    return result


def test_the_document_holds_the_numbers_and_the_worded_findings() -> None:
    doc = soak_record(_result())
    assert set(doc.to_json()) == DOC_KEYS
    assert doc.ok is False and doc.elapsed_s == 1.235 and doc.model == "sim"
    assert (doc.sessions.count, doc.sessions.completed, doc.sessions.rounds_done) == (2, 1, 4)
    assert doc.sessions.requests == 5 and doc.knobs == {"decode/K": "512"}
    (finding,) = doc.findings
    assert finding.title == LAYER_TITLES["client_proxy"] and finding.advice
    assert [e["text"] for e in finding.evidence] == [
        "1 request(s) stalled (1 before any response byte)"
    ]
    assert doc.correctness[0]["kind"] == "tool_args" and doc.stalls[0]["phase"] == "head"
    assert doc.to_json()["errors"] == [
        {"session": 0, "round": 2, "status": 503, "error": "http 503", "detail": "overloaded"}
    ]
    assert doc.to_json()["determinism"] == {"reference_ok": True, "under_load_ok": None}


def test_soak_document_takes_its_findings_as_given() -> None:
    assert soakrecord.soak_document(_result(), []).findings == ()


def test_the_recorded_document_reads_back_equal(tmp_path: Path) -> None:
    doc = soak_record(_result())
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        soak_id = ledger.record_soak(doc)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        soak = ledger.get_soak(soak_id)
    assert soak is not None and soak.findings == doc.findings
    # the same JSON (the soak's own tuples come back as lists, as from any JSON document)
    assert soak.result.to_json() == json.loads(json.dumps(doc.to_json()))
    assert soak.ok is False and soak.knob("decode", "K") == "512"


def test_the_summary_lists_the_typed_failed_requests() -> None:
    text = render_soak(_result())
    assert "failed requests (1):" in text and "  session 0 round 2: http 503" in text
