"""A bench run's run-telemetry evidence (``summary["telemetry_evidence"]``) shown with the metric
each reading cites and its delta: in ``bench``'s text output (report/bench.py) and on the run's
page (report/pages.py, checked in headless Chromium too); and the ``return`` phase named as the
router's way back, not engine time, when Nagle held it (tests/io/http/test_tcp_nodelay.py)."""

from __future__ import annotations

import re
from pathlib import Path

from servelab.core.bench.contract import BenchConfig, BenchResult, RunResult
from servelab.core.bench.record import BenchRunRecord
from servelab.core.ledger.codec import decode, encode
from servelab.core.ledger.export import LedgerExport
from servelab.core.load.clienthealth import client_health
from servelab.core.load.metrics import run_metrics
from servelab.core.telemetry.rules import run_evidence
from servelab.core.telemetry.summary import RunTelemetry
from servelab.core.telemetry.traces import RETURN_HELD_MS
from servelab.io.ledger.ledger import Ledger
from servelab.report import bench as report
from servelab.report.docs import build_docs
from servelab.report.pages import run_markdown
from servelab.report.runnotes import return_note
from tests.report.test_pages import LEVEL, TELEMETRY, TRACES
from tests.support.browser import dump_dom
from tests.support.sysdeps import chromium
from tests.support.telemetry import FAILED, transfer_failure_telemetry


def _run(telemetry: RunTelemetry | None) -> RunResult:
    health = client_health([], 0.0, 1.0, [])
    return RunResult(1, 0, [], run_metrics([]), health, telemetry=telemetry)


def _evidence() -> list[dict[str, object]]:
    return [encode(e) for e in run_evidence(transfer_failure_telemetry(), [])]


def test_bench_text_names_each_fired_or_unknown_rule_with_its_metric_and_delta() -> None:
    lines = report.telemetry_lines(
        BenchResult(BenchConfig(url="r"), runs=[_run(transfer_failure_telemetry())])
    )
    assert (
        f"C1 run 1: ! decode KV transfer counters over the run: KV transfers failed: {FAILED} +2"
        in lines
    )
    assert (
        "C1 run 1: ? prefill waiting queue at the engine's cap over the run: UNKNOWN (HTTP 404; "
        "not healthy)" in lines
    )
    quiet = sum(1 for e in _evidence() if e["state"] == "quiet")
    short = [e for e in _evidence() if e.get("why") in ("too-few-samples", "too-few-tokens")]
    judged = f"{len(short)} not judged"
    assert (
        quiet > 0
        and len(short) == 1
        and lines[-1]
        == (
            f"C1 run 1: {quiet} of {len(_evidence())} rule reading(s) quiet; {judged} "
            "(fewer than 100 tokens counted by the decodes: the run was too short to tell)"
        )
    )
    assert not any("UNKNOWN (too few" in line or "UNKNOWN (fewer" in line for line in lines)
    assert not any("router counters" in line for line in lines)  # quiet: counted, not listed
    assert report.telemetry_lines(BenchResult(BenchConfig(url="r"), runs=[_run(None)])) == []


def _summary(return_p50: float) -> dict[str, object]:
    phases = {**TRACES["summary"]["phases_ms"], "return": {"p50": return_p50, "p90": 45.0}}  # type: ignore[index]
    traces = {**TRACES, "summary": {**TRACES["summary"], "phases_ms": phases}}  # type: ignore[dict-item]
    return {"level": LEVEL, "telemetry": TELEMETRY, "traces": traces,
            "telemetry_evidence": _evidence()}  # fmt: skip


def test_the_run_page_tables_every_reading_and_names_a_held_return() -> None:
    md = run_markdown(BenchRunRecord(7, "2026-12-01T00:00:00Z", "base", {}, _summary(42.3), 8))
    assert "## The run's telemetry as evidence" in md
    assert (
        f"| engine_transfer | decode | fired → decode_transfer | decode: `{FAILED}` delta 2 |" in md
    )
    assert "| engine_saturation | prefill | unknown (HTTP 404) | – |" in md
    assert "| router_errors | router | quiet |" in md
    assert "Return (p50 42.3 ms) is the router's way back to the client" in md
    assert "sglang-router 0.3.2 leaves Nagle's algorithm on" in md
    quick = run_markdown(BenchRunRecord(7, "t", "base", {}, _summary(0.4), 8))
    assert "way back" not in quick and "| return | 0.40 |" in quick


def test_the_return_note_only_for_a_held_chunk() -> None:
    assert return_note(None) is None and return_note(RETURN_HELD_MS - 0.1) is None
    note = return_note(RETURN_HELD_MS)
    assert note is not None and "not engine time" in note and "TCP_NODELAY" in note


def test_headless_chromium_shows_the_evidence_on_the_run_page(tmp_path: Path) -> None:
    chromium()  # skips for a developer without it, fails in CI or as root
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        rid = ledger.record_bench_run(label="b", config={}, summary=_summary(42.3), records=[])
        files = build_docs(decode(LedgerExport, ledger.export()))
    out = tmp_path / "report"
    for name, data in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    page = dump_dom(out / f"runs/run-{rid}.html", tmp_path / "p")
    assert re.search(
        r"<td>engine_transfer</td><td>decode</td><td>fired → decode_transfer</td>", page
    )
    assert "delta 2" in page and "sglang:num_transfer_failed_reqs_total" in page
    assert "the router's way back to the client" in page
