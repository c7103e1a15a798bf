"""Reference answers in the ledger (migration 7's ``answer_references``).

Over the :class:`~servelab.io.ledger.ledger.Ledger`'s own connection and write transactions: one
row per set of references taken, stored through the codec
(:class:`~servelab.core.answers.contract.AnswerReferences`); :meth:`AnswerStore.find` returns the
latest of a key (the state and the probe set, :func:`~servelab.core.answers.contract.state_key`).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from typing import Any

from servelab.core.answers.contract import AnswerReferences
from servelab.core.ledger.codec import decode, encode
from servelab.errors import StoreError
from servelab.io.ledger.ledger import Ledger

__all__ = ["AnswerStore"]


class AnswerStore:
    """Writes and reads reference answers through ``ledger``'s connection."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def add(self, refs: AnswerReferences) -> AnswerReferences:
        """Store ``refs``; returned with its row id."""
        with self._ledger._write() as conn:
            cur = conn.execute(
                "INSERT INTO answer_references (at, key, state, refs) VALUES (?, ?, ?, ?)",
                (self._ledger._now(), refs.key, json.dumps(encode(refs.state)),
                 json.dumps(encode(replace(refs, id=None)))),
            )  # fmt: skip
            return replace(refs, id=int(cur.lastrowid or 0))

    def find(self, key: str) -> AnswerReferences | None:
        """The latest references of ``key`` (None: none stored)."""
        with self._ledger._read() as conn:
            row = conn.execute(
                "SELECT id, refs FROM answer_references WHERE key = ? ORDER BY id DESC LIMIT 1",
                (key,),
            ).fetchone()
        if row is None:
            return None
        return replace(decode(AnswerReferences, _loads(row[1])), id=int(row[0]))

    def get(self, refs_id: int) -> AnswerReferences | None:
        """The references of row ``refs_id`` (None: no such row)."""
        with self._ledger._read() as conn:
            row = conn.execute(
                "SELECT id, refs FROM answer_references WHERE id = ?", (refs_id,)
            ).fetchone()
        if row is None:
            return None
        return replace(decode(AnswerReferences, _loads(row[1])), id=int(row[0]))


def _loads(text: str) -> Any:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, TypeError, sqlite3.Error) as exc:
        raise StoreError(f"a reference answers row is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise StoreError("a reference answers row is not an object")
    return value
