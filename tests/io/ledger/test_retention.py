"""The ledger at scale, against real SQLite files: compact records (and old JSON rows still read),
streaming readers, prune, vacuum and stats."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.bench.record import BenchRunRecord
from servelab.core.case.record import CaseEvidence, CaseRecord, Suspect
from servelab.core.ledger.codec import encode
from servelab.core.load.records import RequestRecord
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.migrations import SCHEMA_VERSION, migrate
from servelab.io.ledger.tables import NOW

DAY = 86_400.0


class _Clock:
    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        return self.now


def _records(n: int, run: int = 0) -> list[dict[str, object]]:
    out = []
    for i in range(n):
        sent = 10**14 + run * 10**10 + i * 10**6
        events = [sent + 10**8 + k * 2 * 10**7 + i for k in range(20)]
        rec = RequestRecord(index=i, scheduled_ns=sent - 500, sent_ns=sent, input_tokens=64,
                            first_byte_ns=events[0], end_ns=events[-1] + 1, status=200,
                            output_tokens=20, event_ns=events, event_tokens=[1] * 20)  # fmt: skip
        out.append(encode(rec))
    return out


@pytest.fixture
def clock() -> _Clock:
    return _Clock()


@pytest.fixture
def ledger(tmp_path: Path, clock: _Clock) -> Iterator[Ledger]:
    opened = Ledger.open(tmp_path / "ledger.db", clock=clock)
    yield opened
    opened.close()


def test_records_are_stored_compact_and_read_back_whole(ledger: Ledger) -> None:
    recs = _records(50)
    run = ledger.record_bench_run(label="c", config={}, summary={}, records=[*recs, {"odd": 1}])
    raw = sqlite3.connect(ledger.path)
    try:
        kinds = raw.execute("SELECT typeof(record), COUNT(*) FROM bench_records GROUP BY 1")
        assert dict(kinds.fetchall()) == {"blob": 50, "text": 1}  # the odd one stays JSON
        stored = raw.execute("SELECT SUM(length(record)) FROM bench_records WHERE seq < 50")
        compact = int(stored.fetchone()[0])
    finally:
        raw.close()
    as_json = sum(len(json.dumps(r, sort_keys=True, separators=(",", ":"))) for r in recs)
    assert as_json / compact >= 5.0, (as_json, compact)
    got = ledger.get(BenchRunRecord, run)
    assert got is not None and got.records is not None
    assert [dict(r) for r in got.records] == [*recs, {"odd": 1}]
    assert list(ledger.iter_bench_records(run, batch=7)) == [*recs, {"odd": 1}]


def test_streaming_readers_page_through_every_row(ledger: Ledger) -> None:
    runs = [
        ledger.record_bench_run(label=str(i), config={"i": i}, summary={}, records=_records(13, i))
        for i in range(3)
    ]
    assert [len(list(ledger.iter_bench_records(r, batch=5))) for r in runs] == [13, 13, 13]
    rows = list(ledger.iter_rows("bench_records", batch=4))
    assert len(rows) == 39 and [r["seq"] for r in rows[:14]] == [*range(13), 0]
    assert rows[0]["record"] == _records(13, 0)[0]
    assert [r["config"] for r in ledger.iter_rows("bench_runs", batch=2)] == [
        {"i": i} for i in range(3)
    ]
    raw = [r["config"] for r in ledger.iter_rows("bench_runs", decode=False)]
    assert raw == ['{"i":0}', '{"i":1}', '{"i":2}']
    assert "bench_records" in ledger.table_names()
    assert ledger.table_columns("bench_records") == ("run_id", "seq", "record")


def _legacy_ledger(path: Path) -> list[dict[str, object]]:
    """A ledger written before compact records (schema 3): records are JSON text."""
    recs = _records(30)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    migrate(conn, source=str(path), upto=3)
    conn.execute("INSERT INTO bench_runs (at, label, config, summary, n_records) "
                 "VALUES ('2026-01-01T00:00:00.000Z', 'old', '{}', '{}', 30)")  # fmt: skip
    conn.executemany(
        "INSERT INTO bench_records (run_id, seq, record) VALUES (1, ?, ?)",
        [(i, json.dumps(r, sort_keys=True)) for i, r in enumerate(recs)],
    )
    conn.execute("COMMIT")
    conn.close()
    return recs


def test_an_old_ledger_migrates_reads_its_json_rows_and_vacuum_compacts_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    recs = _legacy_ledger(path)
    with Ledger.open(path) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION == 8
        old = ledger.get(BenchRunRecord, 1)
        assert old is not None and old.records is not None and old.records_pruned_at is None
        assert [dict(r) for r in old.records] == recs
        assert ledger.stats().records_legacy == 30
        new = ledger.record_bench_run(label="new", config={}, summary={}, records=recs)
        result = ledger.vacuum(batch=7)
        assert result.records_compacted == 30
        assert ledger.stats().records_legacy == 0
        assert list(ledger.iter_bench_records(1)) == recs == list(ledger.iter_bench_records(new))


def test_prune_keeps_summaries_cases_and_evidence_and_says_so(
    ledger: Ledger, clock: _Clock
) -> None:
    ids = []
    for i in range(4):
        ids.append(
            ledger.record_bench_run(
                label=str(i), config={}, summary={"i": i}, records=_records(5, i)
            )
        )
        clock.now += DAY
    case = ledger.add(CaseRecord(id=0, at=NOW, title="hang", status="open"))
    ledger.add(CaseEvidence(at=NOW, case_id=case, kind="run", ref_id=ids[0], note="before"))
    ledger.resolve_case(case_id=case, root_cause="proxy", verdicts={"knob:decode/K": "exonerated"})
    with pytest.raises(ValueError, match="exactly one"):
        ledger.prune_records()
    result = ledger.prune_records(keep_runs=1)
    assert result.run_ids == (ids[1], ids[2]) and result.records == 10
    assert result.kept_as_evidence == (ids[0],)
    pruned = ledger.get(BenchRunRecord, ids[1])
    assert pruned is not None and pruned.records == () and pruned.n_records == 5
    assert pruned.summary == {"i": 1} and pruned.records_pruned_at == result.at
    assert encode(pruned)["records_pruned_at"] == result.at
    kept = ledger.get(BenchRunRecord, ids[3])
    assert kept is not None and kept.records is not None and len(kept.records) == 5
    assert kept.records_pruned_at is None and "records_pruned_at" not in encode(kept)
    evidence = ledger.get(BenchRunRecord, ids[0])
    assert evidence is not None and evidence.records is not None and len(evidence.records) == 5
    assert (
        ledger.get(CaseRecord, case) is not None
        and ledger.list(Suspect, case_id=case)[0].verdict == "exonerated"
    )
    assert ledger.prune_records(keep_runs=1).run_ids == ()  # already pruned: nothing again
    assert ledger.prune_records(older_than_s=0.5 * DAY).run_ids == (ids[3],)
    assert ledger.stats().runs_pruned == 3


def test_stats_count_rows_and_bytes_per_table(ledger: Ledger) -> None:
    ledger.record_bench_run(label="x", config={}, summary={}, records=_records(200))
    stats = ledger.stats()
    tables = {t.name: t for t in stats.tables}
    assert tables["bench_records"].rows == 200 and tables["bench_runs"].rows == 1
    assert stats.method == "dbstat"  # this SQLite has the dbstat table
    assert tables["bench_records"].bytes is not None and tables["bench_records"].bytes > 200 * 100
    assert stats.schema_version == SCHEMA_VERSION and stats.page_size > 0
    assert stats.file_bytes >= stats.pages * stats.page_size // 2
    before = ledger.vacuum().bytes_before
    ledger.prune_records(keep_runs=0)
    after = ledger.vacuum()
    assert after.bytes_after < before and after.records_compacted == 0
