"""The A/B journal: every finished visit of an A/B, saved as it ends, so ``ab --resume ID`` can
pick an interrupted experiment up (Ctrl-C, a lost SSH link) without measuring a visit twice.

It lives in the ledger's SQLite file, over the :class:`~servelab.io.ledger.ledger.Ledger`'s own
connection and write transactions, in two tables of its own created on first use (so it needs no
ledger migration):

- ``ab_sessions``: one row per A/B started (service, knob, the A/B config, the knob's original
  value, ``status`` running/interrupted/finished, and the ``ab_runs`` id once finished);
- ``ab_visits``: one row per finished visit (session, position in the visit plan, the visit).

A visit is stored and read through the codec (:mod:`servelab.core.ledger.codec`), so a journal
written by an older servelab resumes too.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from servelab.core.ab.result import ArmVisit
from servelab.core.ledger.codec import decode, encode
from servelab.errors import DamagedRow, RecordError, StoreError
from servelab.io.ledger.connection import names_nothing
from servelab.io.ledger.damaged import misfit
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.owners import JournalOwner, RunKind, write_owner

__all__ = ["AbJournal", "AbSession", "SessionStatus"]


class SessionStatus(StrEnum):
    """Where a journalled A/B stands (stored: values unchanged)."""

    RUNNING = "running"
    INTERRUPTED = "interrupted"
    FINISHED = "finished"
    #: every visit ran, but its last step (restore, or ``--keep``) failed: the original put back
    FAILED = "failed"


_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS ab_sessions (
    id INTEGER PRIMARY KEY, service TEXT NOT NULL, knob TEXT NOT NULL, config TEXT NOT NULL,
    original TEXT, status TEXT NOT NULL, ab_id INTEGER
)""",
    """CREATE TABLE IF NOT EXISTS ab_visits (
    session_id INTEGER NOT NULL REFERENCES ab_sessions(id) ON DELETE CASCADE,
    position INTEGER NOT NULL, visit TEXT NOT NULL, PRIMARY KEY (session_id, position)
)""",
)


@dataclass(frozen=True, slots=True)
class AbSession:
    """One journalled A/B: its config, the knob's original value, status and finished visits."""

    session_id: int
    service: str
    knob: str
    #: JSON: the A/B's config (its type, ops' AbConfig, is above this layer)
    config: Mapping[str, Any]
    original: str | None
    status: SessionStatus
    ab_id: int | None
    visits: tuple[ArmVisit, ...]


class AbJournal:
    """Writes and reads the A/B journal through ``ledger``'s connection."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        with ledger._write() as conn:
            for statement in _SCHEMA:
                conn.execute(statement)

    def start(
        self,
        *,
        service: str,
        knob: str,
        config: Mapping[str, Any],
        original: str | None,
        owner: JournalOwner | None = None,
    ) -> int:
        """A new session, ``running``, of the deployment ``owner`` names
        (:mod:`servelab.io.ledger.owners`); its id is what ``ab --resume`` takes."""
        with self._ledger._write() as conn:
            cur = conn.execute(
                "INSERT INTO ab_sessions (service, knob, config, original, status) "
                "VALUES (?, ?, ?, ?, ?)",
                (service, knob, json.dumps(dict(config)), original, SessionStatus.RUNNING),
            )
            session_id = int(cur.lastrowid or 0)
            if owner is not None:
                write_owner(conn, RunKind.AB, session_id, owner)
            return session_id

    def add_visit(self, session_id: int, position: int, visit: ArmVisit) -> None:
        """Save one finished visit (its own transaction: a crash later keeps it)."""
        with self._ledger._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO ab_visits (session_id, position, visit) VALUES (?, ?, ?)",
                (session_id, position, json.dumps(encode(visit))),
            )

    def set_status(self, session_id: int, status: SessionStatus, ab_id: int | None = None) -> None:
        with self._ledger._write() as conn:
            conn.execute(
                "UPDATE ab_sessions SET status = ?, ab_id = COALESCE(?, ab_id) WHERE id = ?",
                (status, ab_id, session_id),
            )

    def get(self, session_id: int) -> AbSession | None:
        """The session and its visits in plan order (None when there is no such session)."""
        if names_nothing((session_id,)):
            return None  # an id past SQLite's integers (10^20) names no A/B
        with self._ledger._read() as conn:
            row = conn.execute(
                "SELECT id, service, knob, config, original, status, ab_id FROM ab_sessions "
                "WHERE id = ?",
                (session_id,),
            ).fetchone()
            visits = conn.execute(
                "SELECT visit, position FROM ab_visits WHERE session_id = ? ORDER BY position",
                (session_id,),
            ).fetchall()
        if row is None:
            return None
        return AbSession(
            session_id=int(row[0]),
            service=str(row[1]),
            knob=str(row[2]),
            config=self._config(session_id, row[3]),
            original=None if row[4] is None else str(row[4]),
            status=self._status(session_id, row[5]),
            ab_id=None if row[6] is None else int(row[6]),
            visits=tuple(self._visit(session_id, v[1], v[0]) for v in visits),
        )

    def _visit(self, session_id: int, position: int, text: str) -> ArmVisit:
        """A stored visit read back, else one line naming the file, the visit and the field."""
        try:
            return decode(ArmVisit, _loads(text))
        except (RecordError, StoreError) as exc:
            where = f"ab_visits (A/B {session_id}, visit {position})"
            raise self.damaged(where, "an A/B visit", exc) from None

    def _config(self, session_id: int, text: str) -> dict[str, Any]:
        try:
            return _loads(text)
        except StoreError as exc:
            raise self.damaged(f"ab_sessions (A/B {session_id}) config", "an A/B", exc) from None

    def _status(self, session_id: int, text: object) -> SessionStatus:
        try:
            return SessionStatus(str(text))
        except ValueError as exc:
            where = f"ab_sessions (A/B {session_id})"
            raise self.damaged(where, "an A/B session", exc) from None

    def damaged(self, where: str, what: str, exc: Exception) -> DamagedRow:
        """The one-line error of a journal row that does not read as ``what`` (a hand edit):
        the ledger's file, the row and the first field that does not fit (exit 2)."""
        return DamagedRow(
            f"{self._ledger.path}: the A/B journal's {where} does not read as {what} "
            f"({misfit(exc)}); fix it, or start a new `servelab ab`"
        )


def _loads(text: str) -> dict[str, Any]:
    """A JSON object the journal holds (parsed here: the journal's own JSON edge)."""
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, sqlite3.Error) as exc:
        raise StoreError(f"the A/B journal holds a value that is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise StoreError("the A/B journal holds a value that is not an object")
    return value
