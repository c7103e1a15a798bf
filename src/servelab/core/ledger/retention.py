"""What the ledger's retention commands report: rows and bytes per table (``ledger stats``), the
records a prune removed, a vacuum's bytes before and after. Data only:
:mod:`servelab.io.ledger.admin` measures and changes the file, :mod:`servelab.report.ledger` words
the results.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LedgerStats", "PruneResult", "TableStats", "VacuumResult"]


@dataclass(frozen=True)
class TableStats:
    """One table: its rows and the bytes of its pages and its indexes' (None: not measurable)."""

    name: str
    rows: int
    bytes: int | None


@dataclass(frozen=True)
class LedgerStats:
    """``ledger stats``: per table, and the file's pages (``method``: ``dbstat`` when SQLite's
    dbstat table measured each table, else ``pages``: the file's page counts only)."""

    path: str
    schema_version: int
    file_bytes: int
    page_size: int
    pages: int
    free_pages: int
    method: str
    tables: tuple[TableStats, ...]
    runs_pruned: int
    records_legacy: int  # per-request records still stored as JSON text (vacuum compacts them)


@dataclass(frozen=True)
class PruneResult:
    """What ``ledger prune`` did: the runs whose records went, how many records, which runs were
    kept because a case holds them as evidence."""

    run_ids: tuple[int, ...]
    records: int
    kept_as_evidence: tuple[int, ...]
    at: str
    spans: int = 0  # the received spans that went with the runs' records


@dataclass(frozen=True)
class VacuumResult:
    """``ledger vacuum``: file bytes before and after, and records rewritten compactly."""

    bytes_before: int
    bytes_after: int
    records_compacted: int
