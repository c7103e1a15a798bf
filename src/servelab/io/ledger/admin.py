"""Keeping a ledger's size in hand: what each table holds (``ledger stats``), dropping old
per-request records (``ledger prune``) and giving the space back (``ledger vacuum``).

Pruning removes a bench run's per-request records and its received spans only: the run keeps its
summary and its row count and says when its records went (``records_pruned_at``); deployments,
knob changes, verifications, A/B and soak runs (with a soak's spans), cases with their suspects,
evidence and verdicts are never pruned, and a run attached to a case as evidence keeps its
records and spans. Each function takes the ledger's connection; the
:class:`~servelab.io.ledger.ledger.Ledger` opens the transaction (or, for ``VACUUM``, none).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from servelab.core.ledger.retention import LedgerStats, PruneResult, TableStats
from servelab.io.ledger.rows import encode_record

__all__ = [
    "compact_batch",
    "file_bytes",
    "prune_records",
    "select_prunable",
    "table_stats",
    "vacuum",
]


def file_bytes(path: Path) -> int:
    """The ledger's bytes on disk: the file and its write-ahead log."""
    wal = path.with_name(path.name + "-wal")
    return sum(p.stat().st_size for p in (path, wal) if p.exists())


def _tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name"
    ).fetchall()
    return [str(r[0]) for r in rows]


def _dbstat_bytes(conn: sqlite3.Connection) -> dict[str, int] | None:
    owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master").fetchall())
    try:
        rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    except sqlite3.OperationalError:  # SQLite built without SQLITE_ENABLE_DBSTAT_VTAB
        return None
    sizes: dict[str, int] = {}
    for name, size in rows:
        table = owner.get(name, name)
        sizes[table] = sizes.get(table, 0) + int(size or 0)
    return sizes


def _pragma(conn: sqlite3.Connection, name: str) -> int:
    return int(conn.execute(f"PRAGMA {name}").fetchone()[0])


def table_stats(conn: sqlite3.Connection, path: Path) -> LedgerStats:
    """Rows and bytes per table, and the file's pages."""
    sizes = _dbstat_bytes(conn)
    tables = tuple(
        TableStats(
            name,
            int(conn.execute(f"SELECT COUNT(*) FROM {name}").fetchone()[0]),
            None if sizes is None else sizes.get(name, 0),
        )
        for name in _tables(conn)
    )
    pruned = conn.execute("SELECT COUNT(*) FROM bench_runs WHERE records_pruned_at IS NOT NULL")
    legacy = conn.execute("SELECT COUNT(*) FROM bench_records WHERE typeof(record) = 'text'")
    return LedgerStats(
        path=str(path),
        schema_version=_pragma(conn, "user_version"),
        file_bytes=file_bytes(path),
        page_size=_pragma(conn, "page_size"),
        pages=_pragma(conn, "page_count"),
        free_pages=_pragma(conn, "freelist_count"),
        method="pages" if sizes is None else "dbstat",
        tables=tables,
        runs_pruned=int(pruned.fetchone()[0]),
        records_legacy=int(legacy.fetchone()[0]),
    )


def select_prunable(
    conn: sqlite3.Connection, *, keep_runs: int | None, before: str | None
) -> tuple[list[int], list[int]]:
    """``(runs to prune, runs kept as case evidence)``: runs that still hold records and are not
    among the ``keep_runs`` newest, or were recorded ``before`` that ISO time."""
    rows = conn.execute(
        "SELECT id, at FROM bench_runs WHERE records_pruned_at IS NULL ORDER BY id DESC"
    ).fetchall()
    if keep_runs is not None:
        rows = rows[keep_runs:]
    if before is not None:
        rows = [r for r in rows if str(r[1]) < before]
    evidence = {
        int(r[0])
        for r in conn.execute(
            "SELECT ref_id FROM case_evidence WHERE kind = 'run' AND ref_id IS NOT NULL"
        )
    }
    ids = sorted(int(r[0]) for r in rows)
    return [i for i in ids if i not in evidence], [i for i in ids if i in evidence]


def prune_records(
    conn: sqlite3.Connection, run_ids: list[int], kept: list[int], now: str
) -> PruneResult:
    """Delete the per-request records and spans of ``run_ids`` and mark those runs pruned at
    ``now``."""
    removed, spans = 0, 0
    for run_id in run_ids:
        cur = conn.execute("DELETE FROM bench_records WHERE run_id = ?", (run_id,))
        removed += max(cur.rowcount, 0)
        cur = conn.execute("DELETE FROM spans WHERE run_id = ?", (run_id,))
        spans += max(cur.rowcount, 0)
        conn.execute("UPDATE bench_runs SET records_pruned_at = ? WHERE id = ?", (now, run_id))
    return PruneResult(tuple(run_ids), removed, tuple(kept), now, spans)


def compact_batch(conn: sqlite3.Connection, after: int, batch: int) -> tuple[int, int]:
    """Rewrite up to ``batch`` records stored as JSON text (rowid > ``after``) in the compact
    form where they have its shape; ``(last rowid seen, records rewritten)``, rowid 0: done."""
    rows = conn.execute(
        "SELECT rowid, record FROM bench_records WHERE rowid > ? AND typeof(record) = 'text' "
        "ORDER BY rowid LIMIT ?",
        (after, batch),
    ).fetchall()
    changed = 0
    for rowid, text in rows:
        stored = encode_record(json.loads(text))
        if isinstance(stored, bytes):
            conn.execute("UPDATE bench_records SET record = ? WHERE rowid = ?", (stored, rowid))
            changed += 1
    return (int(rows[-1][0]) if rows else 0), changed


def vacuum(conn: sqlite3.Connection) -> None:
    """Checkpoint the write-ahead log and rebuild the file without its free pages."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
