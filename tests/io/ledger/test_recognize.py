"""A file that is not a servelab ledger is refused before anything writes it (issue 38, H3 and
M1): another program's SQLite database, a ledger whose tables are missing, a FIFO; a command that
only reads never creates or upgrades. Real SQLite files, compared byte for byte."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest

from servelab.core.case.record import CaseRecord
from servelab.errors import NotALedger, SchemaError, StoreError
from servelab.io.ledger import journal
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.migrations import SCHEMA_VERSION, migrate
from servelab.io.ledger.owners import OWNERS_TABLE, JournalOwner
from servelab.io.ledger.recognize import JOURNAL_TABLES, expected_tables
from servelab.io.ledger.tables import NOW

#: The three ways a command opens a ledger: writing (may create), writing an existing one,
#: reading only.
OPENINGS = {
    "create": {"create": True},
    "existing": {"create": False},
    "reads_only": {"create": False, "reads_only": True},
}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _sqlite(path: Path, *statements: str) -> Path:
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return path


def _ledger_at(path: Path, version: int, *statements: str) -> Path:
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("BEGIN IMMEDIATE")
    migrate(raw, source=str(path), upto=version)
    for statement in statements:
        raw.execute(statement)
    raw.execute("COMMIT")
    raw.close()
    return path


def _unchanged(path: Path, digest: str) -> None:
    assert _digest(path) == digest, "the file was written"
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name], "a file was made beside"


@pytest.mark.parametrize("opening", sorted(OPENINGS))
def test_another_programs_database_is_refused_and_left_as_it_was(
    opening: str, tmp_path: Path
) -> None:
    app = _sqlite(tmp_path / "app.db", "CREATE TABLE users (name, pw)",
                  "INSERT INTO users VALUES ('ada', 'x')")  # fmt: skip
    digest = _digest(app)
    with pytest.raises(NotALedger) as info:
        Ledger.open(app, **OPENINGS[opening])
    assert str(info.value) == (
        f"{app} is an SQLite database but not a servelab ledger (tables: users); "
        "check --ledger/SERVELAB_LEDGER"
    )
    _unchanged(app, digest)
    conn = sqlite3.connect(app)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    conn.close()


@pytest.mark.parametrize("opening", sorted(OPENINGS))
def test_servelab_tables_without_a_schema_version_are_not_a_complete_ledger(
    opening: str, tmp_path: Path
) -> None:
    v0 = _sqlite(tmp_path / "v0.db", "CREATE TABLE knob_changes (id INTEGER PRIMARY KEY)")
    digest = _digest(v0)
    with pytest.raises(NotALedger, match=r"not a complete servelab ledger \(version 0") as info:
        Ledger.open(v0, **OPENINGS[opening])
    assert "knob_changes" in str(info.value) and "write failed" not in str(info.value)
    _unchanged(v0, digest)


@pytest.mark.parametrize("opening", sorted(OPENINGS))
def test_a_version_without_its_tables_names_what_is_missing(opening: str, tmp_path: Path) -> None:
    v3 = _sqlite(tmp_path / "v3.db", "PRAGMA user_version = 3", "CREATE TABLE runs (id)")
    digest = _digest(v3)
    with pytest.raises(NotALedger) as info:
        Ledger.open(v3, **OPENINGS[opening])
    said = str(info.value)
    assert said.startswith(f"{v3}: not a complete servelab ledger (version 3, missing tables: ")
    assert "ab_runs, bench_records, bench_runs" in said and "and 5 more" in said
    assert said.endswith("; tables not servelab's: runs)")
    _unchanged(v3, digest)


def test_a_missing_column_is_named(tmp_path: Path) -> None:
    """Version 4 added ``bench_runs.records_pruned_at``: a file saying 4 without it is refused."""
    path = _ledger_at(tmp_path / "v4.db", 3, "PRAGMA user_version = 4")
    digest = _digest(path)
    with pytest.raises(
        NotALedger, match=r"\(version 4, missing columns: bench_runs\.records_pruned"
    ):
        Ledger.open(path)
    assert _digest(path) == digest


def test_a_table_of_its_own_in_a_ledger_is_refused(tmp_path: Path) -> None:
    path = _ledger_at(tmp_path / "l.db", SCHEMA_VERSION, "CREATE TABLE notes (text)")
    said = rf"not a servelab ledger \(version {SCHEMA_VERSION}, tables not servelab's: notes\)"
    with pytest.raises(NotALedger, match=said):
        Ledger.open(path, create=False, reads_only=True)


def test_the_ab_journal_tables_are_servelabs(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with Ledger.open(path) as ledger:
        journal.AbJournal(ledger).get(1)  # makes the journal's tables
        assert set(ledger.table_names()) >= JOURNAL_TABLES - {OWNERS_TABLE}
        owner = JournalOwner("dep-a", "dep-a/decode@local:1", "/x/a/servelab.toml")
        journal.AbJournal(ledger).start(service="decode", knob="K", config={}, original=None,
                                        owner=owner)  # fmt: skip
        assert set(ledger.table_names()) >= JOURNAL_TABLES  # the owners' table: on first write
    with Ledger.open(path, create=False, reads_only=True) as ledger:
        assert ledger.list(CaseRecord) == []
    made = {s.split()[5] for s in journal._SCHEMA}  # CREATE TABLE IF NOT EXISTS <name> (
    assert made | {OWNERS_TABLE} == JOURNAL_TABLES
    assert not JOURNAL_TABLES & set(expected_tables(SCHEMA_VERSION))


@pytest.mark.parametrize("version", [1, 3, 5, SCHEMA_VERSION - 1])
def test_a_reading_command_never_upgrades_an_older_ledger(version: int, tmp_path: Path) -> None:
    path = _ledger_at(tmp_path / "old.db", version)
    digest = _digest(path)
    with pytest.raises(StoreError) as info:
        Ledger.open(path, create=False, reads_only=True)
    assert str(info.value) == (
        f"{path}: older ledger of version {version} (this servelab's is {SCHEMA_VERSION}): run a "
        f"writing command to upgrade it (`servelab ledger vacuum --ledger {path}`); this command "
        "only reads, so it changed nothing"
    )
    assert not isinstance(info.value, NotALedger)
    _unchanged(path, digest)
    with Ledger.open(path, create=False) as ledger:  # a writing command upgrades it
        assert ledger.schema_version == SCHEMA_VERSION
    with Ledger.open(path, create=False, reads_only=True) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION


def test_an_empty_database_is_a_ledger_only_to_a_command_that_creates_one(tmp_path: Path) -> None:
    path = _sqlite(tmp_path / "empty.db", "CREATE TABLE t (x)", "DROP TABLE t")
    digest = _digest(path)
    for opening in ("existing", "reads_only"):
        with pytest.raises(StoreError, match=r"no ledger at .*an SQLite database with nothing"):
            Ledger.open(path, **OPENINGS[opening])
        _unchanged(path, digest)
    with Ledger.open(path) as ledger:
        assert ledger.add(CaseRecord(id=0, at=NOW, title="t", status="open")) == 1


@pytest.mark.parametrize("opening", sorted(OPENINGS))
def test_a_fifo_or_a_directory_is_not_a_ledger_file(opening: str, tmp_path: Path) -> None:
    fifo = tmp_path / "l.fifo"
    os.mkfifo(fifo)
    with pytest.raises(NotALedger) as info:
        Ledger.open(fifo, **OPENINGS[opening])
    assert str(info.value) == (
        f"{fifo} is a FIFO or pipe, not a ledger file (check --ledger/SERVELAB_LEDGER)"
    )
    with pytest.raises(NotALedger, match="is a directory, not a ledger file"):
        Ledger.open(tmp_path, **OPENINGS[opening])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.fifo"]


def test_a_newer_ledger_is_still_refused_as_newer_when_only_read(tmp_path: Path) -> None:
    path = _ledger_at(tmp_path / "new.db", SCHEMA_VERSION, "CREATE TABLE future (x)",
                      f"PRAGMA user_version = {SCHEMA_VERSION + 1}")  # fmt: skip
    with pytest.raises(SchemaError, match="newer than this servelab supports"):
        Ledger.open(path, create=False, reads_only=True)


def test_a_current_ledger_opens_for_every_command(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with Ledger.open(path) as ledger:
        ledger.add(CaseRecord(id=0, at=NOW, title="kept", status="open"))
    for opening in OPENINGS.values():
        with Ledger.open(path, **opening) as ledger:
            assert [c.title for c in ledger.list(CaseRecord)] == ["kept"]


def test_a_reading_command_opens_a_ledger_a_writer_holds_without_writing(tmp_path: Path) -> None:
    """Only reading, no write transaction: a writer holding the ledger neither blocks the reader
    nor makes it say "cannot start a write" (a writing open does wait, then fails)."""
    path = tmp_path / "l.db"
    with Ledger.open(path) as ledger:
        ledger.add(CaseRecord(id=0, at=NOW, title="kept", status="open"))
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        with Ledger.open(path, create=False, reads_only=True, busy_timeout_s=0.2) as ledger:
            assert [c.title for c in ledger.list(CaseRecord)] == ["kept"]
        with pytest.raises(StoreError, match="cannot start a write"):
            Ledger.open(path, create=False, busy_timeout_s=0.2)
    finally:
        writer.execute("ROLLBACK")
        writer.close()


@pytest.mark.parametrize("opening", sorted(OPENINGS))
def test_a_file_that_is_not_sqlite_is_bad_input_and_left_alone(
    opening: str, tmp_path: Path
) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all\n" * 100, encoding="utf-8")
    digest = _digest(text)
    with pytest.raises(NotALedger) as info:
        Ledger.open(text, **OPENINGS[opening])
    assert str(info.value) == (
        f"{text}: not a usable ledger: file is not a database (check --ledger/SERVELAB_LEDGER)"
    )
    _unchanged(text, digest)
