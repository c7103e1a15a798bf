"""A measurement the ledger refuses is kept beside it (:mod:`servelab.io.ledger.unsaved`), and a
ledger that cannot take a write says so before a measurement (``check_writable``): real SQLite
files, refusing writes as a full disk does (``PRAGMA max_page_count``) or read-only."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from servelab.core.bench.record import BenchRunRecord
from servelab.errors import StoreError
from servelab.io.ledger.ledger import Ledger


def _full(ledger: Ledger) -> None:
    """No page more for this connection: the next write that needs one fails as on a full disk."""
    pages = ledger._conn.execute("PRAGMA page_count").fetchone()[0]
    ledger._conn.execute(f"PRAGMA max_page_count = {pages}")


def test_a_bench_run_the_ledger_refuses_is_kept_beside_it(tmp_path: Path) -> None:
    records = [{"index": i, "note": "x" * 500} for i in range(200)]
    with Ledger.open(tmp_path / "l.db") as ledger:
        _full(ledger)
        with pytest.raises(StoreError) as refused:
            ledger.record_bench_run(label="big", config={"c": 1},
                                    summary={"std": math.nan}, records=records)  # fmt: skip
    message = str(refused.value)
    assert "full" in message and "what was measured is kept in " in message
    kept = Path(message.rpartition("kept in ")[2])
    assert kept.parent == tmp_path and kept.name.startswith("l.db.unsaved-bench_run-")
    data = json.loads(kept.read_text(), parse_constant=lambda c: pytest.fail(c))
    assert data["records"] == records and data["summary"] == {"std": None}
    with Ledger.open(tmp_path / "l.db") as ledger:
        assert ledger.list(BenchRunRecord) == []  # all or nothing


def test_a_ledger_that_cannot_take_a_write_says_so_before_the_work(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        ledger.check_writable()  # a healthy ledger: nothing changes
        assert ledger.schema_version > 0
        ledger._conn.execute("PRAGMA query_only = 1")
        with pytest.raises(StoreError, match="readonly"):
            ledger.check_writable()
