"""Received spans in the ledger, against real SQLite files: one row per span with its run or soak,
written in the run's transaction, read back typed and in order, migrated into an old ledger,
exported with their runs, and removed with a run's records by a prune."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from servelab.cli.ledger import export_csv, export_stream
from servelab.core.bench.record import BenchRunRecord
from servelab.core.ledger.codec import decode
from servelab.core.soak.result import SoakConfig, SoakResult, Targets
from servelab.core.telemetry.spans import REQUEST_ID_ATTR, Span
from servelab.errors import StoreError
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.migrations import SCHEMA_VERSION, migrate
from servelab.report.ledger import prune_lines

_SOAK = SoakResult(SoakConfig(), Targets("http://e"))


def _spans(rid: str, n: int = 3) -> list[Span]:
    """A worker span, then router spans naming the request (the ``request_id`` column)."""
    return [
        Span(f"{i:032x}", f"{i + 1:016x}", "" if i == 0 else f"{i:016x}",
             "http_request" if i else "prefill Req 0a1b2c3d", "smg" if i else "sglang",
             1_000 + i, 2_000 + i,
             {REQUEST_ID_ATTR: rid, "n": i, "nested": {"a": [1, 2]}} if i else {"k": "v"})
        for i in range(n)
    ]  # fmt: skip


def test_spans_round_trip_in_the_runs_transaction(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        got = _spans("servelab-a-0", 5)
        run = ledger.record_bench_run(label=None, config={}, summary={}, records=[{"a": 1}],
                                      spans=got)  # fmt: skip
        other = ledger.record_bench_run(label=None, config={}, summary={}, records=[])
        soak = ledger.record_soak(_SOAK, spans=_spans("servelab-s-0", 2))
        assert ledger.spans(run_id=run) == got
        assert list(ledger.iter_spans(run_id=run, batch=2)) == got  # paged, in order
        assert ledger.spans(run_id=other) == []
        assert ledger.spans(soak_id=soak) == _spans("servelab-s-0", 2)
        with pytest.raises(ValueError, match="exactly one"):
            ledger.spans()
        # a span that cannot be stored takes its run with it: all or nothing
        bad = Span("t", "s", "", "n", "svc", 1, 2, {"x": object()})
        with pytest.raises(StoreError):
            ledger.record_bench_run(label=None, config={}, summary={}, records=[], spans=[bad])
        assert [r.id for r in ledger.list(BenchRunRecord)] == [run, other]
    raw = sqlite3.connect(tmp_path / "ledger.db")
    row = raw.execute(
        "SELECT run_id, soak_id, request_id, attributes FROM spans WHERE span_id = ?",
        (f"{2:016x}",),
    ).fetchone()
    raw.close()
    assert row[:3] == (run, None, "servelab-a-0")
    assert row[3] == '{"n":1,"nested":{"a":[1,2]},"request_id":"servelab-a-0"}'


def test_an_old_ledger_migrates_to_the_spans_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("BEGIN IMMEDIATE")
    migrate(raw, source=str(path), upto=4)
    raw.execute("INSERT INTO bench_runs (at, label, config, summary, n_records) "
                "VALUES ('2026-01-01T00:00:00.000Z', 'old', '{}', '{}', 0)")  # fmt: skip
    raw.execute("COMMIT")
    raw.close()
    with Ledger.open(path) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION == 8
        assert "spans" in ledger.table_names()
        assert ledger.spans(run_id=1) == []  # the old run: no spans, none invented
        new = ledger.record_bench_run(label=None, config={}, summary={}, records=[],
                                      spans=_spans("r"))  # fmt: skip
        assert ledger.spans(run_id=new) == _spans("r")
        assert ledger.get(BenchRunRecord, 1) is not None


def test_prune_removes_a_runs_spans_and_keeps_the_rest(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        old = ledger.record_bench_run(label=None, config={}, summary={}, records=[{"a": 1}],
                                      spans=_spans("old", 4))  # fmt: skip
        new = ledger.record_bench_run(label=None, config={}, summary={}, records=[{"a": 2}],
                                      spans=_spans("new", 2))  # fmt: skip
        soak = ledger.record_soak(_SOAK, spans=_spans("soak", 3))
        rows = {t.name: t.rows for t in ledger.stats().tables}
        assert rows["spans"] == 9
        result = ledger.prune_records(keep_runs=1)
        assert result.run_ids == (old,) and result.records == 1 and result.spans == 4
        assert "1 per-request record(s) and 4 span(s) of 1 run(s)" in prune_lines(result)[0]
        assert ledger.spans(run_id=old) == []
        assert ledger.spans(run_id=new) == _spans("new", 2)
        assert ledger.spans(soak_id=soak) == _spans("soak", 3)  # soaks are never pruned
        assert {t.name: t.rows for t in ledger.stats().tables}["spans"] == 5


def test_every_export_format_carries_the_spans(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        run = ledger.record_bench_run(label=None, config={}, summary={}, records=[{"a": 1}],
                                      spans=_spans("r", 3))  # fmt: skip
        soak = ledger.record_soak(_SOAK, spans=_spans("s", 2))
        export_stream(ledger, "json", str(tmp_path / "out.json"), records=True)
        export_stream(ledger, "json", str(tmp_path / "bare.json"), records=False)
        export_stream(ledger, "jsonl", str(tmp_path / "out.jsonl"), records=True)
        export_csv(ledger, tmp_path / "csv", records=True)
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["export_version"] == 4
    (bench,) = doc["bench_runs"]
    assert bench["id"] == run and bench["records"] == [{"a": 1}]
    assert [decode(Span, s) for s in bench["spans"]] == _spans("r", 3)
    (soaked,) = doc["soak_runs"]
    assert soaked["id"] == soak and [decode(Span, s) for s in soaked["spans"]] == _spans("s", 2)
    bare = json.loads((tmp_path / "bare.json").read_text())
    assert "spans" not in bare["bench_runs"][0] and "records" not in bare["bench_runs"][0]
    lines = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    spans = [x for x in lines if x["table"] == "spans"]
    assert len(spans) == 5 and spans[1]["attributes"][REQUEST_ID_ATTR] == "r"
    assert {x["run_id"] for x in spans[:3]} == {run} and {x["soak_id"] for x in spans[3:]} == {soak}
    manifest = json.loads((tmp_path / "csv" / "manifest.json").read_text())
    assert manifest["rows"]["spans.csv"] == 5
