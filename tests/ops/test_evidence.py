"""record_soak against a real SQLite ledger: the row, its findings, and the case evidence."""

from __future__ import annotations

from pathlib import Path

from servelab.io.store import Ledger
from servelab.ops.evidence import record_soak


def _doc(ok: bool, layers: list[str]) -> dict[str, object]:
    findings = [{"layer": layer, "confidence": 0.9} for layer in layers]
    return {"ok": ok, "config": {"knobs": {"decode": {"K": "512"}}}, "findings": findings}


def test_record_soak_writes_the_row_and_its_findings(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        soak_id = record_soak(ledger, _doc(False, ["client_proxy"]))
        row = ledger.get_soak(soak_id)
        assert ledger.list_evidence(ledger.create_case(title="t")) == []
    assert row is not None
    assert row["ok"] is False
    assert row["config"] == {"knobs": {"decode": {"K": "512"}}}
    assert [f["layer"] for f in row["findings"]] == ["client_proxy"]


def test_record_soak_attaches_it_to_the_case(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        case_id = ledger.create_case(title="hang")
        failing = record_soak(ledger, _doc(False, ["client_proxy", "router"]), case_id)
        clean = record_soak(ledger, _doc(True, []), case_id)
        evidence = ledger.list_evidence(case_id)
    assert [(e["kind"], e["ref_id"], e["note"]) for e in evidence] == [
        ("soak", failing, "client_proxy, router"),
        ("soak", clean, "no finding"),
    ]
