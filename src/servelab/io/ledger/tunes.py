"""Tunes in the ledger: each tune's row, its visits saved as they end, and its result.

Over the :class:`~servelab.io.ledger.ledger.Ledger`'s own connection and write transactions, in
the tables of migration 6 (:mod:`servelab.io.ledger.migrations`): ``tune_runs`` (the tune's knobs,
config, the knobs' values before it, status, and its result once finished) and ``tune_visits``
(one row per finished visit, each its own transaction: a crash later keeps it). A tune's row is
both its journal (``tune --resume ID`` reads the visits back) and its record. Visits and results
are stored and read through the codec (:mod:`servelab.core.ledger.codec`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from servelab.core.ab.result import ArmVisit
from servelab.core.ab.tunerun import TuneRecord
from servelab.core.ledger.codec import decode, encode
from servelab.errors import StoreError
from servelab.io.ledger.connection import names_nothing
from servelab.io.ledger.journal import SessionStatus
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.owners import JournalOwner, RunKind, write_owner

__all__ = ["StoredTune", "TuneStore"]


@dataclass(frozen=True, slots=True)
class StoredTune:
    """One tune as stored: its row, its finished visits in order, its result once finished."""

    tune_id: int
    at: str
    knobs: str
    #: JSON: the tune's config (its type, ops' TuneConfig, is above this layer)
    config: Mapping[str, Any]
    original: tuple[str | None, ...]
    status: SessionStatus
    visits: tuple[ArmVisit, ...]
    result: TuneRecord | None


class TuneStore:
    """Writes and reads tunes through ``ledger``'s connection."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def start(
        self,
        *,
        knobs: str,
        config: Mapping[str, Any],
        original: Sequence[str | None],
        owner: JournalOwner | None = None,
    ) -> int:
        """A new tune, ``running``, of the deployment ``owner`` names
        (:mod:`servelab.io.ledger.owners`); its id is what ``tune --resume`` takes."""
        with self._ledger._write() as conn:
            cur = conn.execute(
                "INSERT INTO tune_runs (at, knobs, config, original, status) "
                "VALUES (?, ?, ?, ?, ?)",
                (self._ledger._now(), knobs, json.dumps(dict(config)), json.dumps(list(original)),
                 SessionStatus.RUNNING),
            )  # fmt: skip
            tune_id = int(cur.lastrowid or 0)
            if owner is not None:
                write_owner(conn, RunKind.TUNE, tune_id, owner)
            return tune_id

    def add_visit(self, tune_id: int, position: int, visit: ArmVisit) -> None:
        """Save one finished visit (its own transaction)."""
        with self._ledger._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO tune_visits (tune_id, position, visit) VALUES (?, ?, ?)",
                (tune_id, position, json.dumps(encode(visit))),
            )

    def set_status(self, tune_id: int, status: SessionStatus) -> None:
        with self._ledger._write() as conn:
            conn.execute("UPDATE tune_runs SET status = ? WHERE id = ?", (status, tune_id))

    def finish(self, tune_id: int, result: TuneRecord) -> None:
        """Store the result and mark the tune finished, in one transaction."""
        with self._ledger._write() as conn:
            conn.execute(
                "UPDATE tune_runs SET status = ?, result = ? WHERE id = ?",
                (SessionStatus.FINISHED, json.dumps(encode(result)), tune_id),
            )

    def get(self, tune_id: int) -> StoredTune | None:
        """The tune with its visits in order (None: no such tune)."""
        if names_nothing((tune_id,)):
            return None  # an id past SQLite's integers (10^20) names no tune
        with self._ledger._read() as conn:
            row = conn.execute(
                "SELECT id, at, knobs, config, original, status, result FROM tune_runs "
                "WHERE id = ?",
                (tune_id,),
            ).fetchone()
            visits = conn.execute(
                "SELECT visit FROM tune_visits WHERE tune_id = ? ORDER BY position", (tune_id,)
            ).fetchall()
        return None if row is None else _stored(row, [v[0] for v in visits])

    def list(self) -> list[StoredTune]:
        """Every tune, oldest first, without its visits (its result holds the finished ones)."""
        with self._ledger._read() as conn:
            rows = conn.execute(
                "SELECT id, at, knobs, config, original, status, result FROM tune_runs ORDER BY id"
            ).fetchall()
        return [_stored(row, []) for row in rows]


def _stored(row: Sequence[Any], visits: Sequence[str]) -> StoredTune:
    original = _loads(row[4])
    if not isinstance(original, list):
        raise StoreError("a tune's original values are not a list")
    result = None if row[6] is None else decode(TuneRecord, _loads(row[6]))
    return StoredTune(
        tune_id=int(row[0]),
        at=str(row[1]),
        knobs=str(row[2]),
        config=_object(_loads(row[3])),
        original=tuple(None if v is None else str(v) for v in original),
        status=SessionStatus(row[5]),
        visits=tuple(decode(ArmVisit, _object(_loads(v))) for v in visits),
        result=result,
    )


def _loads(text: str) -> Any:
    """A JSON value a tune's row holds (parsed here: the store's own JSON edge)."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError, sqlite3.Error) as exc:
        raise StoreError(f"a tune's row holds a value that is not JSON: {exc}") from exc


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise StoreError("a tune's row holds a value that is not an object")
    return value
