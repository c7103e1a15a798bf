"""The journalled runs' owners (:mod:`servelab.io.ledger.owners`): written in the run's own
transaction, read back; a ledger without the table, a hand-edited row or table reads as no owner
(an older run's: ``ops/ab/owner.py`` then decides from the knob's file)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from servelab.io.ledger.journal import AbJournal
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.owners import JournalOwner, RunKind, read_owner
from servelab.io.ledger.tunes import TuneStore

OWNER = JournalOwner("dep-a", "dep-a/decode@local:26001", "/x/a/servelab.toml")


def test_an_owner_is_written_with_its_run_and_read_back(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        assert read_owner(ledger, RunKind.AB, 1) is None  # no table yet
        ab = AbJournal(ledger).start(service="decode", knob="K", config={}, original="256",
                                     owner=OWNER)  # fmt: skip
        tune = TuneStore(ledger).start(knobs="K", config={}, original=["256"], owner=OWNER)
        older = AbJournal(ledger).start(service="decode", knob="K", config={}, original=None)
        assert read_owner(ledger, RunKind.AB, ab) == OWNER
        assert read_owner(ledger, RunKind.TUNE, tune) == OWNER
        assert read_owner(ledger, RunKind.AB, older) is None
        assert read_owner(ledger, RunKind.TUNE, 10**20) is None


def test_a_hand_edited_owner_reads_as_none(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with Ledger.open(path) as ledger:
        ab = AbJournal(ledger).start(service="decode", knob="K", config={}, original="256",
                                     owner=OWNER)  # fmt: skip
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE journal_owners SET mark = ?", (b"\xff\x00binary",))
    with Ledger.open(path) as ledger:
        assert read_owner(ledger, RunKind.AB, ab) is None
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE journal_owners")
        conn.execute("CREATE TABLE journal_owners (text)")
    with Ledger.open(path) as ledger:
        assert read_owner(ledger, RunKind.AB, ab) is None
