"""Telling a servelab ledger from any other file before anything writes it.

Every command looks at an existing ledger file before SQLite opens it to write: the file is opened
read-only (``mode=ro``, no journal-mode change, nothing created beside a rollback-journal file) and
its schema version and tables are compared with what the migrations make. A path that is not a
regular file (a FIFO, a directory, a device), an SQLite database of another program (a table
servelab never makes) and an incomplete one (a schema version whose tables or columns are missing)
are refused with :class:`~servelab.errors.NotALedger` (exit 2), nothing written. A rollback
journal left by a writer killed mid-write is rolled back by a command that may write (SQLite's
own recovery) and named, with what to do, by one that only reads (:func:`look`). A command that
only reads never creates or upgrades: an empty database is refused as a missing ledger is, and an
older ledger is refused with the command that upgrades it.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from servelab.errors import NotALedger, StoreError
from servelab.io.ledger.migrations import MIGRATIONS, SCHEMA_VERSION, statements, too_new

__all__ = ["Found", "check", "expected_tables", "look", "not_a_file"]

#: Tables servelab makes outside the migrations: the A/B journal's and the journalled runs'
#: owners, created on first use (:mod:`servelab.io.ledger.journal`, :mod:`~.owners`).
JOURNAL_TABLES = frozenset({"ab_sessions", "ab_visits", "journal_owners"})

#: Most names listed in one refusal (the rest counted).
_LISTED = 8


@dataclass(frozen=True, slots=True)
class Found:
    """What an existing SQLite file holds: its ``user_version`` and its tables' columns."""

    version: int
    tables: Mapping[str, frozenset[str]]


@functools.cache
def expected_tables(version: int) -> Mapping[str, frozenset[str]]:
    """The tables (with their columns) migrations 1..``version`` make, built in memory."""
    conn = sqlite3.connect(":memory:")
    try:
        for script in MIGRATIONS[:version]:
            for statement in statements(script):
                conn.execute(statement)
        return _tables(conn)
    finally:
        conn.close()


def _tables(conn: sqlite3.Connection) -> dict[str, frozenset[str]]:
    rows = conn.execute(
        "SELECT m.name, c.name FROM sqlite_master AS m LEFT JOIN pragma_table_info(m.name) AS c "
        "WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'"
    ).fetchall()
    columns: dict[str, set[str]] = {}
    for table, column in rows:
        columns.setdefault(str(table), set()).update(() if column is None else (str(column),))
    return {table: frozenset(names) for table, names in columns.items()}


def not_a_file(path: Path) -> str | None:
    """What ``path`` is when it exists and is not a regular file (``a FIFO``), else None."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    return "a FIFO or pipe" if stat.S_ISFIFO(mode) else "a device or socket"


def look(path: Path, busy_timeout_s: float, *, may_write: bool = False) -> Found:
    """Read ``path``'s schema version and tables through a connection that only reads
    (``mode=ro``; ``immutable=1`` when SQLite cannot keep a WAL file's shared memory beside it,
    a read-only directory).

    A hot rollback journal beside it (``PATH-journal``, left by a writer killed mid-write) is
    rolled back first when ``may_write`` (SQLite's own recovery, what any writer's open does);
    otherwise it is a :class:`~servelab.errors.StoreError` saying so and what to do (read past
    it, the file would read as "malformed")."""
    uri = path.absolute().as_uri()
    try:
        return _look(f"{uri}?mode=ro", busy_timeout_s)
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):  # a writer held it past the timeout
            raise StoreError(f"{path}: cannot open the ledger: {exc}") from exc
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_READONLY_ROLLBACK":
            _roll_back(path, busy_timeout_s, may_write=may_write)
            return look(path, busy_timeout_s)
    except sqlite3.DatabaseError as exc:  # not SQLite at all (a text file, a wrong path)
        raise NotALedger(
            f"{path}: not a usable ledger: {exc} (check --ledger/SERVELAB_LEDGER)"
        ) from exc
    try:
        return _look(f"{uri}?immutable=1", busy_timeout_s)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: not a usable ledger: {exc}") from exc


def _interrupted(path: Path) -> str:
    return (
        f"{path}: a write to the ledger was interrupted (a servelab killed or crashed while "
        f"writing): its rollback journal {path.name}-journal is still beside it"
    )


def _roll_back(path: Path, busy_timeout_s: float, *, may_write: bool) -> None:
    """Roll back the interrupted write whose journal is beside ``path`` (SQLite does it on the
    first read of a connection that may write), else say what it is and what to do."""
    if not may_write or not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        raise StoreError(
            f"{_interrupted(path)}; this command cannot roll it back (it only reads, or the file "
            "or its directory is read-only): run a command that writes the ledger where it can "
            f"be written (`servelab ledger vacuum --ledger {path}`); never delete the journal "
            "(the ledger would be left corrupt)"
        )
    try:
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=rw", timeout=busy_timeout_s,
                               uri=True)  # fmt: skip
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise StoreError(f"{_interrupted(path)}; rolling it back failed: {exc}") from exc


def _look(uri: str, busy_timeout_s: float) -> Found:
    conn = sqlite3.connect(uri, timeout=busy_timeout_s, uri=True)
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        return Found(version, _tables(conn))
    finally:
        conn.close()


def _names(names: set[str] | list[str]) -> str:
    ordered = sorted(names)
    more = len(ordered) - _LISTED
    return ", ".join(ordered[:_LISTED]) + (f" and {more} more" if more > 0 else "")


def check(path: Path, found: Found, *, reads_only: bool, creates: bool) -> None:
    """Refuse ``found`` unless it is a servelab ledger the command may open (see the module)."""
    if found.version > SCHEMA_VERSION:
        raise too_new(str(path), found.version)
    ours = set(expected_tables(SCHEMA_VERSION)) | JOURNAL_TABLES
    foreign = set(found.tables) - ours
    if foreign and found.version == 0:
        raise NotALedger(
            f"{path} is an SQLite database but not a servelab ledger (tables: {_names(foreign)}); "
            "check --ledger/SERVELAB_LEDGER"
        )
    if found.version == 0 and found.tables:
        raise NotALedger(
            f"{path}: not a complete servelab ledger (version 0: servelab's tables without a "
            f"schema version: {_names(list(found.tables))})"
        )
    if missing := _missing(found):
        extra = f"; tables not servelab's: {_names(foreign)}" if foreign else ""
        raise NotALedger(
            f"{path}: not a complete servelab ledger (version {found.version}, {missing}{extra})"
        )
    if foreign:
        raise NotALedger(
            f"{path}: not a servelab ledger (version {found.version}, tables not servelab's: "
            f"{_names(foreign)})"
        )
    _check_use(path, found.version, reads_only=reads_only, creates=creates)


def _missing(found: Found) -> str:
    """The tables and columns migrations 1..version make that ``found`` lacks, in words."""
    expected = expected_tables(found.version)
    tables = set(expected) - set(found.tables)
    columns = [f"{name}.{col}" for name, cols in expected.items() if name in found.tables
               for col in cols - found.tables[name]]  # fmt: skip
    parts = [f"missing tables: {_names(tables)}"] if tables else []
    return ", ".join(parts + ([f"missing columns: {_names(columns)}"] if columns else []))


def _check_use(path: Path, version: int, *, reads_only: bool, creates: bool) -> None:
    """An empty database is a ledger only to a command that creates one; an older ledger is
    upgraded only by a command that writes."""
    if version == 0 and not creates:
        raise StoreError(
            f"no ledger at {path}: an SQLite database with nothing in it, not a ledger "
            "(check --ledger/SERVELAB_LEDGER)"
        )
    if reads_only and version < SCHEMA_VERSION:
        raise StoreError(
            f"{path}: older ledger of version {version} (this servelab's is {SCHEMA_VERSION}): "
            f"run a writing command to upgrade it (`servelab ledger vacuum --ledger {path}`); "
            "this command only reads, so it changed nothing"
        )
