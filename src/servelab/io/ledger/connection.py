"""Opening a ledger file: where it is, the SQLite connection, its pragmas (WAL, busy timeout,
foreign keys, ``synchronous = FULL``), the refusal to create a ledger where one is only read, and
:class:`LedgerFile`: the open file with its one lock and transactions, which
:class:`~servelab.io.ledger.ledger.Ledger` builds its readers and writers on.

A ledger that cannot be written (a read-only file or directory, a read-only mount, an archive) is
still read: opened only to read (``mode=ro``, else ``immutable=1`` when SQLite cannot keep its
shared-memory file beside it), neither migrated nor switched to WAL; a write to it fails saying
so. One at an older schema is refused, since its readers expect today's tables.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from servelab.errors import NotALedger, StoreError
from servelab.io.ledger.migrations import SCHEMA_VERSION, migrate, schema_version
from servelab.io.ledger.recognize import check, look, not_a_file
from servelab.io.ledger.rows import JSON_COLUMNS, decode_row, insert

__all__ = [
    "LEDGER_ENV",
    "LedgerFile",
    "connect",
    "default_ledger_path",
    "names_nothing",
    "prepare",
    "resolve_ledger_path",
    "writable",
]

#: Environment variable that moves the ledger (``--ledger`` on the command line wins over it).
LEDGER_ENV = "SERVELAB_LEDGER"


def default_ledger_path(state_dir: Path) -> Path:
    """``$SERVELAB_LEDGER`` when set, else ``<state_dir>/ledger.db``."""
    moved = os.environ.get(LEDGER_ENV, "").strip()
    return Path(moved).expanduser() if moved else Path(state_dir) / "ledger.db"


def resolve_ledger_path(option: Path | None, state_dir: Path) -> Path:
    """The ledger a command uses: ``--ledger``, else ``$SERVELAB_LEDGER``, else the state dir's."""
    return option.expanduser() if option is not None else default_ledger_path(state_dir)


def writable(path: Path) -> bool:
    """Whether the ledger at ``path`` (an existing file) can be written: the file, and its
    directory for SQLite's ``-wal`` and ``-shm`` files (``access(2)``: a read-only mount is not
    writable, even to root)."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _open(target: str | Path, busy_timeout_s: float, *, uri: bool) -> sqlite3.Connection:
    return sqlite3.connect(
        target, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False, uri=uri
    )


def _read_only(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """A connection that only reads ``path``; ``immutable=1`` when SQLite cannot keep its
    shared-memory file for a WAL ledger beside it (nothing else writes a read-only ledger)."""
    uri = path.absolute().as_uri()
    conn = _open(f"{uri}?mode=ro", busy_timeout_s, uri=True)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:
        conn.close()
        conn = _open(f"{uri}?immutable=1", busy_timeout_s, uri=True)
    return conn


def connect(
    path: Path, busy_timeout_s: float, create: bool, *, read_only: bool = False
) -> sqlite3.Connection:
    """A connection to the ledger at ``path`` (autocommit: the ledger opens its transactions).

    ``create=False``: a missing or empty file (0 bytes: SQLite would make it a new database; a
    ledger always has its header page, WAL or not) is a :class:`StoreError`, and nothing is
    written.
    ``read_only``: a connection that only reads.
    """
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
        return _open(path, busy_timeout_s, uri=False)
    if not path.is_file():
        raise StoreError(
            f"no ledger at {path} (nothing recorded there; check --ledger/{LEDGER_ENV})"
        )
    if path.stat().st_size == 0:  # SQLite would make it a new ledger; a real one has a header
        raise StoreError(
            f"no ledger at {path}: the file is empty, not a ledger (check --ledger/{LEDGER_ENV})"
        )
    if read_only:
        return _read_only(path, busy_timeout_s)
    # read-write, never create: a file removed meanwhile is an error, not a new ledger
    return _open(f"{path.absolute().as_uri()}?mode=rw", busy_timeout_s, uri=True)


def prepare(conn: sqlite3.Connection, path: Path, busy_timeout_s: float) -> None:
    """Busy timeout, foreign keys, WAL and full fsync on ``conn`` (not yet migrated)."""
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000):d}")
        conn.execute("PRAGMA foreign_keys = ON")
        _set_wal(conn, busy_timeout_s)
        conn.execute("PRAGMA synchronous = FULL")
    except sqlite3.DatabaseError as exc:
        if full := _full_disk(path):  # SQLite says "disk I/O error" (the WAL's index not made)
            raise StoreError(f"{path}: cannot open the ledger: {full}") from exc
        raise StoreError(f"{path}: not a usable ledger: {exc}") from exc


#: Free space under which a ledger's disk is called full when SQLite fails on it.
_FULL_BYTES = 64 << 10


def _full_disk(path: Path) -> str | None:
    """ "its disk is full (N KiB free)" when ``path``'s file system has under ``_FULL_BYTES``
    free (None: it has room, or cannot be asked): said instead of SQLite's "disk I/O error",
    which reads as a broken ledger."""
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        return None
    return f"its disk is full ({free // 1024} KiB free)" if free < _FULL_BYTES else None


def _rebuild_failure(path: Path, exc: sqlite3.Error) -> str:
    """Why a ``VACUUM`` of the ledger at ``path`` failed: its disk full (with what is free and
    what the rebuild needs: about the file's size again), else SQLite's words."""
    if getattr(exc, "sqlite_errorcode", None) != sqlite3.SQLITE_FULL:
        return str(exc)
    try:
        free, size = shutil.disk_usage(path.parent).free, path.stat().st_size
    except OSError:
        return "its disk is full"
    return (f"its disk is full ({free // 1024:,} KiB free; a vacuum rewrites the whole "
            f"ledger, {size // 1024:,} KiB, beside it): free space on it, or leave the ledger "
            "as it is")  # fmt: skip


def _set_wal(conn: sqlite3.Connection, busy_timeout_s: float) -> None:
    deadline = time.monotonic() + busy_timeout_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


#: SQLite's integers (a query given one outside them finds no row rather than failing).
_SQL_MIN, _SQL_MAX = -(2**63), 2**63 - 1


def names_nothing(params: tuple[Any, ...]) -> bool:
    """Whether a query's parameters hold an integer SQLite cannot store (an id of 10^20): no
    row holds it, so the query finds nothing (sqlite3 would raise OverflowError instead)."""
    return any(isinstance(p, int) and not _SQL_MIN <= p <= _SQL_MAX for p in params)


def _recognize(path: Path, busy_timeout_s: float, *, create: bool, reads_only: bool) -> None:
    """Refuse what is at ``path`` unless it is a ledger this command may open (nothing there, or
    an empty file: :func:`connect` decides)."""
    if kind := not_a_file(path):
        raise NotALedger(f"{path} is {kind}, not a ledger file (check --ledger/{LEDGER_ENV})")
    if path.is_file() and path.stat().st_size > 0:
        found = look(path, busy_timeout_s, may_write=not reads_only)
        check(path, found, reads_only=reads_only, creates=create)


class LedgerFile:
    """The open SQLite file under a :class:`~servelab.io.ledger.ledger.Ledger`: opening and
    migrating,
    one lock, the write transaction and the read helpers every reader and writer uses."""

    def __init__(self, conn: sqlite3.Connection, path: Path, clock: Callable[[], float]) -> None:
        self._conn = conn
        self._path = path
        self._clock = clock
        self._lock = threading.Lock()

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        clock: Callable[[], float] | None = None,
        busy_timeout_s: float = 30.0,
        create: bool = True,
        reads_only: bool = False,
    ) -> Self:
        """Open (creating it and its directory if needed) and migrate the ledger at ``path``.

        ``create=False``: a ledger that does not exist is refused with a
        :class:`~servelab.errors.StoreError` and nothing is created (no directory, no file); one
        that cannot be written is opened to read only (a write to it fails).
        ``reads_only`` (a command that only reads; implies ``create=False``): an older ledger is
        refused, not upgraded.
        An existing file is looked at read-only first (:mod:`servelab.io.ledger.recognize`): one
        that is not a servelab ledger is refused with :class:`~servelab.errors.NotALedger`.
        """
        path = Path(path)
        create = create and not reads_only
        _recognize(path, busy_timeout_s, create=create, reads_only=reads_only)
        read_only = not create and path.is_file() and not writable(path)
        try:
            conn = connect(path, busy_timeout_s, create, read_only=read_only)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"{path}: cannot open the ledger: {exc}") from exc
        ledger = cls(conn, path, clock or time.time)
        try:
            if read_only:
                ledger._check_readable()
            else:
                ledger._prepare(busy_timeout_s, upgrade=not reads_only)
        except BaseException:
            conn.close()
            raise
        return ledger

    def _prepare(self, busy_timeout_s: float, *, upgrade: bool) -> None:
        """The pragmas, then the missing migrations (``upgrade=False``, a command that only
        reads: none, no write transaction; :mod:`~servelab.io.ledger.recognize` found today's
        schema)."""
        prepare(self._conn, self._path, busy_timeout_s)
        if upgrade:
            with self._write() as conn:
                migrate(conn, source=str(self._path))

    def _check_readable(self) -> None:
        """A ledger opened to read only: its schema must be today's (no migration can run)."""
        with self._read() as conn:
            found = schema_version(conn)
        if found != SCHEMA_VERSION:
            raise StoreError(
                f"{self._path}: the ledger cannot be written and is at schema version {found}; "
                f"this servelab reads {SCHEMA_VERSION}: open it once where it can be written to "
                "upgrade it"
            )

    @property
    def path(self) -> Path:
        return self._path

    @property
    def schema_version(self) -> int:
        with self._read() as conn:
            return schema_version(conn)

    def check_writable(self) -> None:
        """Commit a write that changes nothing (the schema version set to itself): a ledger that
        cannot take a record (its file read-only, its disk full, locked) fails here, before the
        minutes of a measurement, instead of after them."""
        with self._write() as conn:
            conn.execute(f"PRAGMA user_version = {schema_version(conn):d}")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- transactions ------------------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: ``BEGIN IMMEDIATE`` … ``COMMIT`` (rolled back on any error)."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"{self._path}: cannot start a write: {exc}") from exc
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException as exc:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"{self._path}: write failed: {exc}") from exc
                raise

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._conn
            except sqlite3.Error as exc:
                raise StoreError(f"{self._path}: read failed: {exc}") from exc

    @contextmanager
    def _rebuild(self) -> Iterator[sqlite3.Connection]:
        """The connection for ``VACUUM``, which rewrites the whole file: a full disk is said as
        such (SQLite's "database or disk is full" read as a broken ledger after "read failed")."""
        with self._lock:
            try:
                yield self._conn
            except sqlite3.Error as exc:
                why = _rebuild_failure(self._path, exc)
                raise StoreError(f"{self._path}: vacuum failed: {why}") from exc

    def _now(self, ago_s: float = 0.0) -> str:
        stamp = datetime.fromtimestamp(self._clock() - ago_s, tz=UTC)
        return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _insert(self, conn: sqlite3.Connection, table: str, values: Mapping[str, Any]) -> int:
        return insert(conn, table, values)

    def _query(
        self,
        sql: str,
        params: tuple[Any, ...] = (),
        json_columns: frozenset[str] = JSON_COLUMNS,
    ) -> list[dict[str, Any]]:
        if names_nothing(params):
            return []  # no row holds an integer SQLite cannot (an id of 10^20 names nothing)
        with self._read() as conn:
            cur = conn.execute(sql, params)
            return [decode_row(cur, raw, json_columns) for raw in cur.fetchall()]

    def _one(self, sql: str, params: tuple[Any, ...]) -> dict[str, Any] | None:
        rows = self._query(sql, params)
        return rows[0] if rows else None
