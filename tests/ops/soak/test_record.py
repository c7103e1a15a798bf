"""A soak's result as the ledger stores it: the document's numbers, its worded findings, and the
same document read back typed from a real ledger file."""

from __future__ import annotations

import json
from pathlib import Path

from servelab.core.ledger.results import Determinism, FailedRequest
from servelab.core.soak.diagnose import CorrectnessIssue, Finding, Observation, Stall, Undecided
from servelab.core.soak.observe import Localization
from servelab.core.soak.replay import Cell, Matrix, locate
from servelab.core.soak.signatures import Failure
from servelab.core.verify.coldstart import StartClass
from servelab.io.ledger.ledger import Ledger
from servelab.ops.soak import record as soakrecord
from servelab.ops.soak.soak import SessionOutcome, SoakConfig, SoakResult, Targets
from servelab.report.soak.soak import LAYER_TITLES, render_soak, soak_record

#: The keys of ``servelab soak --json`` (and of the ledger's soak ``result``).
DOC_KEYS = {
    "ok", "soak_id", "model", "elapsed_s", "interrupted", "deadline_hit", "config", "targets",
    "sessions", "stalls", "errors", "correctness", "determinism", "localized", "observations",
    "findings", "failures", "localizations", "start", "undecided", "telemetry",
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


def _localized() -> SoakResult:
    """A result with one localization (a stall on a reused connection) and its matrix."""
    result = _result()
    failure = Failure("stall_head", 1, 1, 900, 2.5, 1)
    cells = (
        Cell("pair", "prefill+decode", "failing", True, 900, "ok", 200, 0.1, 0.05, 300,
             prefill="prefill", decode="decode"),
        Cell("router", "router", "failing", True, 900, "ok", 200, 0.1, 0.05, 300),
        Cell("entry_fresh", "entry", "failing", True, 900, "ok", 200, 0.1, 0.05, 300),
        Cell("entry_reused", "entry", "failing", True, 900, "stalled", None, 2.0, None, 0,
             "idle timeout: no bytes"),
    )  # fmt: skip
    matrix = Matrix(cells, locate(cells), None, 2.1)
    result.failures = [failure]
    result.localizations = [Localization(failure, matrix, elapsed_s=2.3)]
    result.start = StartClass("warm", "served-before", 12, 0.0)
    return result


def test_the_matrix_is_stored_with_the_soak_and_printed_as_a_table(tmp_path: Path) -> None:
    result = _localized()
    doc = soak_record(result)
    (loc,) = doc.localizations
    assert loc["signature"] == "stall_head" and loc["elapsed_s"] == 2.3
    assert loc["matrix"]["located"]["layer"] == "client_proxy"
    assert loc["matrix"]["located"]["reason"] == "connection_reuse"
    assert [c["hop"] for c in loc["matrix"]["cells"]] == [
        "pair", "router", "entry_fresh", "entry_reused"
    ]  # fmt: skip
    assert doc.start is not None and doc.start["start"] == "warm"
    assert doc.failures[0]["signature"] == "stall_head" and doc.failures[0]["session"] == 1
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        soak = ledger.get_soak(ledger.record_soak(doc))
    assert soak is not None and soak.result.localizations == tuple(
        json.loads(json.dumps(doc.to_json()))["localizations"]
    )
    text = render_soak(result)
    assert "replay matrix for stall_head (session 1 round 1, 900 B" in text
    assert "entry, reused connection" in text and "STALLED after 2.00 s" in text
    assert "located: a fresh connection gets it through; a reused one fails it -> client_proxy" in (
        text
    )
    assert "engines at start: warm (served-before, 12 served before)" in text


def test_no_finding_says_why_and_which_probe_would_tell() -> None:
    result = _localized()
    result.findings = []
    result.undecided = Undecided("not_reproduced", ("failure.stall_head",), ("router_metrics",),
                                 "replay_under_load")  # fmt: skip
    text = render_soak(result)
    assert "no finding: the failure did not reproduce" in text
    assert "conflicting: failure.stall_head" in text
    assert "unknown (no answer, not healthy): router_metrics" in text
    assert "next probe: soak longer or with more sessions" in text
    assert soak_record(result).undecided == {
        "reason": "not_reproduced",
        "conflicting": ("failure.stall_head",),
        "unknown": ("router_metrics",),
        "probe": "replay_under_load",
    }
