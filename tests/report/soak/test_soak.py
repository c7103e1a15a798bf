"""A soak's result for people and for the ledger: ``soak --json`` holds the numbers and the worded
findings, the ledger holds the same result (codes, never words) and reads it back equal, and the
console prints the matrix, the failed requests and why there is no finding."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from servelab.core.soak.evidence import CorrectnessIssue, Localization, Stall
from servelab.core.soak.finding import Finding
from servelab.core.soak.fresh import FreshContext, UncachedPrefill
from servelab.core.soak.observation import Stalls
from servelab.core.soak.record import SoakRunRecord
from servelab.core.soak.replay import Cell, Hop, Matrix, Payload, locate
from servelab.core.soak.result import (
    Determinism,
    FailedRequest,
    SessionOutcome,
    SoakConfig,
    SoakResult,
    SoakSessions,
    Targets,
)
from servelab.core.soak.signatures import Failure, Outcome, Phase, Signature
from servelab.core.soak.undecided import NextProbe, Undecided, UndecidedReason
from servelab.core.telemetry.layers import Layer
from servelab.core.verify.coldstart import Start, StartClass, StartReason
from servelab.io.ledger.ledger import Ledger
from servelab.report.soak.soak import page_sections, render_soak, soak_json
from servelab.report.soak.words import layer_title
from tests.support.soakresult import every_kind_result

#: The keys of ``servelab soak --json`` (untraced).
DOC_KEYS = {
    "ok", "soak_id", "model", "elapsed_s", "interrupted", "deadline_hit", "config", "targets",
    "sessions", "stalls", "errors", "correctness", "determinism", "localized", "observations",
    "findings", "failures", "localizations", "start", "undecided", "telemetry", "dropped",
    "resends", "exonerated", "uncached",
}  # fmt: skip


def _result() -> SoakResult:
    cfg = SoakConfig(sessions=2, rounds=3, knobs={"decode/K": "512"})
    sessions = [SessionOutcome(0, rounds_done=3, requests=3), SessionOutcome(1, 1, 2)]
    return SoakResult(
        cfg,
        Targets("http://127.0.0.1:1", "http://127.0.0.1:2"),
        model="sim",
        elapsed_s=1.235,
        sessions=SoakSessions.of(sessions, cfg.rounds),
        stalls=(Stall(1, 1, 900, 2.5, 1, 0, 0, Phase.HEAD, "idle"),),
        correctness=(CorrectnessIssue("tool_call_json", 1, 0, "not JSON"),),
        observations=(Stalls("stalls", "entry", False, 1, 1),),
        findings=(Finding(Layer.CLIENT_PROXY, 0.8, ("stalls",), ()),),
        errors=(FailedRequest(0, 2, 503, "http 503", "overloaded"),),
        determinism=Determinism(reference_ok=True, sessions_ended_first=True),
    )


def test_the_document_holds_the_numbers_and_the_worded_findings() -> None:
    doc = json.loads(soak_json(_result()))
    assert set(doc) == DOC_KEYS
    assert doc["ok"] is False and doc["elapsed_s"] == 1.235 and doc["model"] == "sim"
    sessions = doc["sessions"]
    assert (sessions["count"], sessions["completed"], sessions["rounds_done"]) == (2, 1, 4)
    assert sessions["requests"] == 5 and doc["config"]["knobs"] == {"decode/K": "512"}
    (finding,) = doc["findings"]
    assert finding["title"] == layer_title(Layer.CLIENT_PROXY) and finding["advice"]
    assert [e["text"] for e in finding["evidence"]] == [
        "1 request(s) stalled (1 before any response byte)"
    ]
    assert finding["supporting"] == ["stalls"] and finding["layer"] == "client_proxy"
    assert doc["correctness"][0]["kind"] == "tool_call_json" and doc["stalls"][0]["phase"] == "head"
    assert doc["errors"] == [
        {"session": 0, "round": 2, "status": 503, "error": "http 503", "detail": "overloaded"}
    ]
    assert doc["determinism"] == {
        "reference_ok": True, "under_load_ok": None, "concurrency": None, "same_text": None,
        "sessions_ended_first": True,
    }  # fmt: skip
    assert (
        json.loads(soak_json(replace(_result(), findings=())))["findings"] == []
    )  # none: none worded


def test_the_recorded_result_reads_back_equal(tmp_path: Path) -> None:
    result = _result()
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        soak_id = ledger.record_soak(result)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        soak = ledger.get(SoakRunRecord, soak_id)
    assert soak is not None and soak.result == result
    assert soak.ok is False and soak.result.config.knob("decode", "K") == "512"
    with Ledger.open(tmp_path / "ledger.db") as ledger:  # the words are rendered, not stored
        stored = ledger.export()["soak_runs"][0]
    assert "advice" not in json.dumps(stored) and "title" not in json.dumps(stored)


def test_the_summary_lists_the_typed_failed_requests() -> None:
    text = render_soak(_result())
    assert "failed requests (1):" in text and "  session 0 round 2: http 503" in text


def _localized() -> SoakResult:
    """A result with one localization (a stall on a reused connection) and its matrix."""
    failure = Failure(Signature.STALL_HEAD, 1, 1, 900, 2.5, 1)
    ok, stalled = Outcome.OK, Outcome.STALLED
    cells = (
        Cell(Hop.PAIR, "prefill+decode", Payload.FAILING, True, 900, ok, 200, 0.1, 0.05, 300,
             prefill="prefill", decode="decode"),
        Cell(Hop.ROUTER, "router", Payload.FAILING, True, 900, ok, 200, 0.1, 0.05, 300),
        Cell(Hop.FRESH, "entry", Payload.FAILING, True, 900, ok, 200, 0.1, 0.05, 300),
        Cell(Hop.REUSED, "entry", Payload.FAILING, True, 900, stalled, None, 2.0, None, 0,
             "idle timeout: no bytes"),
    )  # fmt: skip
    matrix = Matrix(cells, locate(cells), None, 2.1)
    return replace(
        _result(),
        failures=(failure,),
        localizations=(Localization(failure, matrix, elapsed_s=2.3),),
        start=StartClass(Start.WARM, StartReason.SERVED_BEFORE, 12, 0.0),
    )


def test_the_matrix_is_stored_with_the_soak_and_printed_as_a_table(tmp_path: Path) -> None:
    result = _localized()
    doc = json.loads(soak_json(result))
    (loc,) = doc["localizations"]
    assert loc["failure"]["signature"] == "stall_head" and loc["elapsed_s"] == 2.3
    assert loc["matrix"]["located"]["layer"] == "client_proxy"
    assert loc["matrix"]["located"]["reason"] == "connection_reuse"
    assert [c["hop"] for c in loc["matrix"]["cells"]] == [
        "pair", "router", "entry_fresh", "entry_reused"
    ]  # fmt: skip
    assert doc["start"] is not None and doc["start"]["start"] == "warm"
    assert doc["failures"][0]["signature"] == "stall_head" and doc["failures"][0]["session"] == 1
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        soak = ledger.get(SoakRunRecord, ledger.record_soak(result))
    assert soak is not None and soak.result.localizations == result.localizations
    text = render_soak(result)
    assert "replay matrix for stall_head (session 1 round 1, 900 B" in text
    assert "entry, reused connection" in text and "STALLED after 2.00 s" in text
    assert "located: a fresh connection gets it through; a reused one fails it -> client_proxy" in (
        text
    )
    assert "engines at start: warm (served-before, 12 served before)" in text


def test_no_finding_says_why_and_which_probe_would_tell() -> None:
    why = Undecided(
        UndecidedReason.NOT_REPRODUCED, ("failure.stall_head",), ("router_metrics",),
        NextProbe.REPLAY_UNDER_LOAD,
    )  # fmt: skip
    result = replace(_localized(), findings=(), undecided=why)
    text = render_soak(result)
    assert "no finding: the failure did not reproduce" in text
    assert "conflicting: failure.stall_head" in text
    assert "unknown (no answer, not healthy): router_metrics" in text
    assert "next probe: soak longer or with more sessions" in text
    assert json.loads(soak_json(result))["undecided"] == {
        "reason": "not_reproduced",
        "conflicting": ["failure.stall_head"],
        "unknown": ["router_metrics"],
        "probe": "replay_under_load",
    }


def test_exonerations_and_cell_clocks_are_said_in_every_output() -> None:
    result = every_kind_result()
    (cleared,) = result.exonerated
    text = render_soak(result)
    assert "exonerated (not findings, by the conviction rule):" in text
    assert "exonerated: the failure persists without it" in text
    assert "straight to the router, without the proxy in front of it" in text
    assert "[deadline 4.5 s from its expected answer]" in text
    assert "UNDECIDED after 2.00 s: not streamed and no deadline known" in text
    doc = json.loads(soak_json(result))
    assert [(e["layer"], e["standing"], e["by"]) for e in doc["exonerated"]] == [
        (cleared.layer, "exonerated", "router")
    ]
    assert doc["exonerated"][0]["text"].endswith(cleared.because[0])
    assert all(f["layer"] != cleared.layer for f in doc["findings"])
    page = "\n".join(page_sections(result))
    assert "Exonerated (not findings):" in page and "exonerated: the failure" in page


def test_the_fresh_context_and_the_uncached_prefill_are_said_beside_the_hit_rate() -> None:
    result = _result()
    mix = replace(result.config, fresh_context=FreshContext(48, 1200, 0.25))
    sessions = replace(result.sessions, per_session=(SessionOutcome(0, 3, 3),))
    told = replace(result, config=mix, uncached=UncachedPrefill(1510, 1320, 12), sessions=sessions)
    text = render_soak(told)
    assert "fresh context per round: short 48 or long 1200 words, long 25% of rounds" in text
    assert "uncached prefill per request: max 1510 tokens, p90 1320 (over 12 request(s))" in text
    page = "\n".join(page_sections(told))
    assert "Fresh context per round: short 48" in page and "max 1510 tokens" in page
    doc = json.loads(soak_json(told))
    assert doc["uncached"] == {"max_tokens": 1510, "p90_tokens": 1320, "requests": 12}
    assert doc["config"]["fresh_context"] == {
        "short_words": 48,
        "long_words": 1200,
        "long_share": 0.25,
    }
    unknown = render_soak(replace(told, uncached=UncachedPrefill()))
    assert "uncached prefill per request: unknown" in unknown
