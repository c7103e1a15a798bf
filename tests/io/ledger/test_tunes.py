"""Tunes in a real SQLite ledger: a ledger of the version before migrates to the tune tables; a
tune's visits survive a reopen in order, its status moves, its result reads back typed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from servelab.core.ab.result import ArmVisit
from servelab.core.ab.tune import TuneRule
from servelab.core.ab.tunerun import TuneKnob, TuneMetric, TuneRecord, conclude_tune, grid
from servelab.core.ledger.codec import encode
from servelab.io.ledger.journal import SessionStatus
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.migrations import SCHEMA_VERSION, migrate
from servelab.io.ledger.tunes import TuneStore

KNOB = TuneKnob("decode", "SGLANG_SM120_MMA_TARGET_CTAS", ("256", "512"))


def _visit(arm: str, block: int, position: int) -> ArmVisit:
    return ArmVisit(arm, block, position + 1, arm, {64: 100.0 + position}, 0, (position,),
                    position, "256→512", 2.0, {64: 10.0})  # fmt: skip


def test_a_ledger_of_the_version_before_gets_the_tune_tables(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("BEGIN IMMEDIATE")
    migrate(raw, source=str(path), upto=SCHEMA_VERSION - 1)
    raw.execute("COMMIT")
    raw.close()
    with Ledger.open(path) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION
        assert {"tune_runs", "tune_visits"} <= set(ledger.table_names())
        assert TuneStore(ledger).list() == []


def test_a_tune_survives_a_reopen_and_reads_back_typed(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    visits = [_visit("512", 0, 0), _visit("256", 0, 1), _visit("256", 1, 2)]
    with Ledger.open(path) as ledger:
        store = TuneStore(ledger)
        tid = store.start(knobs="decode:K", config={"margin": 0.05}, original=("256",))
        for visit in reversed(visits):
            store.add_visit(tid, visit.position, visit)
        store.set_status(tid, SessionStatus.INTERRUPTED)
        other = store.start(knobs="decode:K", config={}, original=(None,))
    with Ledger.open(path) as ledger:
        store = TuneStore(ledger)
        stored = store.get(tid)
        assert stored is not None and stored.visits == tuple(visits)  # in plan order
        assert (stored.knobs, stored.config, stored.original) == ("decode:K", {"margin": 0.05},
                                                                   ("256",))  # fmt: skip
        assert stored.status == SessionStatus.INTERRUPTED and stored.result is None
        record = TuneRecord((KNOB,), grid([KNOB]), TuneMetric.THROUGHPUT, (64,), TuneRule(),
                            visits=tuple(visits), tune_id=tid)  # fmt: skip
        record = conclude_tune(record)
        store.finish(tid, record)
        done = store.get(tid)
        assert done is not None and done.status == SessionStatus.FINISHED
        # as stored: an unbounded interval (one block) is null in JSON, read back as NaN
        assert done.result is not None and encode(done.result) == encode(record)
        listed = store.list()
        assert [t.tune_id for t in listed] == [tid, other] and listed[1].original == (None,)
        assert store.get(999) is None
