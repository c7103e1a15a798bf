"""Whose journalled run is (issue 38): the deployment an A/B or a tune was started on.

Two deployments may share one ledger (``SERVELAB_LEDGER``); a journalled run's original values are
its own deployment's, so ``ab --resume``/``tune --resume`` from another deployment would measure
that one's visits beside these and write these values into its files. Each run started names its
deployment here, in the run's own transaction: the spec's ``name``, the mark of its (first)
service (:func:`~servelab.io.hosts.processes.spec_mark`: the name, the service, its host and port,
so two copies of one spec on other ports are told apart) and the spec file.

The table ``journal_owners`` is created on first write, as the A/B journal's are (no ledger
migration); a run recorded before it, or a ledger without the table, has no owner (None).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from enum import StrEnum

from servelab.io.ledger.connection import names_nothing
from servelab.io.ledger.ledger import Ledger

__all__ = ["OWNERS_TABLE", "JournalOwner", "RunKind", "read_owner", "write_owner"]

OWNERS_TABLE = "journal_owners"

_SCHEMA = f"""CREATE TABLE IF NOT EXISTS {OWNERS_TABLE} (
    kind TEXT NOT NULL, run_id INTEGER NOT NULL, deployment TEXT NOT NULL, mark TEXT NOT NULL,
    spec TEXT NOT NULL, PRIMARY KEY (kind, run_id)
)"""


class RunKind(StrEnum):
    """Which journal a run id is of (stored: values unchanged)."""

    AB = "ab"
    TUNE = "tune"


@dataclass(frozen=True, slots=True)
class JournalOwner:
    """The deployment a journalled run was started on: its spec's ``name``, the mark of the
    run's (first) service and the spec file (the embedded default's name for it)."""

    deployment: str
    mark: str
    spec: str


def write_owner(conn: sqlite3.Connection, kind: RunKind, run_id: int, owner: JournalOwner) -> None:
    """Name ``owner`` as run ``run_id``'s, inside the caller's write transaction."""
    conn.execute(_SCHEMA)
    conn.execute(
        f"INSERT OR REPLACE INTO {OWNERS_TABLE} (kind, run_id, deployment, mark, spec) "
        "VALUES (?, ?, ?, ?, ?)",
        (kind, run_id, owner.deployment, owner.mark, owner.spec),
    )


def read_owner(ledger: Ledger, kind: RunKind, run_id: int) -> JournalOwner | None:
    """Run ``run_id``'s owner (None: recorded before runs named theirs, or a row or table that
    does not read as one: a hand edit; the caller then decides as for an older run)."""
    if names_nothing((run_id,)):
        return None
    with ledger._read() as conn:
        try:
            row = conn.execute(
                f"SELECT deployment, mark, spec FROM {OWNERS_TABLE} WHERE kind = ? AND run_id = ?",
                (kind, run_id),
            ).fetchone()
        except sqlite3.OperationalError:
            return None  # no such table (an older ledger), or one of other columns
    if row is None or not all(isinstance(v, str) for v in row):
        return None
    return JournalOwner(deployment=row[0], mark=row[1], spec=row[2])
