"""The evidence ledger: one SQLite file holding everything servelab measured and decided.

Deployments, knob changes, verifications (per layer), bench runs with their per-request records,
A/B experiments, soak runs and findings, and cases (suspects, evidence, events, verdicts). The file
is in WAL mode with a busy timeout; every writer commits exactly one ``BEGIN IMMEDIATE``
transaction and returns the new row id, so a process killed mid-write leaves every earlier record
intact and two processes writing at once serialize instead of corrupting anything. The schema is
versioned with ``PRAGMA user_version`` (see :mod:`servelab.io.migrations`): older ledgers are
migrated on open, newer ones are refused with :class:`~servelab.errors.SchemaError`.

The ledger stores what it is given. Callers pass only declared knob values, never a process
environment: values of undeclared environment variables must not reach these functions.

Readers return the typed records of :mod:`servelab.core.evidence`, oldest first; the A/B and soak
results they hold are typed too, and the writers take them typed. :meth:`Ledger.export` is every
record's ``to_json()`` in one JSON document.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from servelab.core.evidence import (
    AbRunRecord,
    BenchRunRecord,
    CaseEvent,
    CaseExport,
    CaseRecord,
    CheckRecord,
    DeploymentRecord,
    Evidence,
    KnobChangeRecord,
    LedgerExport,
    Resolution,
    SoakRunRecord,
    Suspect,
    VerificationRecord,
)
from servelab.core.results import AbResultRecord, SoakDocument
from servelab.errors import CaseError, StoreError
from servelab.io.ledgerrows import JSON_COLUMNS, check_row, decode_row, dumps, filters, finding_row
from servelab.io.migrations import SCHEMA_VERSION, migrate, schema_version

__all__ = ["LEDGER_ENV", "SCHEMA_VERSION", "Ledger", "default_ledger_path", "resolve_ledger_path"]

#: Environment variable that moves the ledger (``--ledger`` on the command line wins over it).
LEDGER_ENV = "SERVELAB_LEDGER"

_EVIDENCE_KINDS = frozenset({"run", "verify", "soak", "ab", "note", "experiment"})


def default_ledger_path(state_dir: Path) -> Path:
    """``$SERVELAB_LEDGER`` when set, else ``<state_dir>/ledger.db``."""
    moved = os.environ.get(LEDGER_ENV, "").strip()
    return Path(moved).expanduser() if moved else Path(state_dir) / "ledger.db"


def resolve_ledger_path(option: Path | None, state_dir: Path) -> Path:
    """The ledger a command uses: ``--ledger``, else ``$SERVELAB_LEDGER``, else the state dir's."""
    return option.expanduser() if option is not None else default_ledger_path(state_dir)


class Ledger:
    """An open ledger file. Use :meth:`open`; close it (or use it as a context manager)."""

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
    ) -> Ledger:
        """Open (creating it and its directory if needed) and migrate the ledger at ``path``.

        ``create=False``: a ledger that does not exist is refused with a
        :class:`~servelab.errors.StoreError` and nothing is created (no directory, no file).
        """
        path = Path(path)
        try:
            conn = cls._connect(path, busy_timeout_s, create)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"{path}: cannot open the ledger: {exc}") from exc
        ledger = cls(conn, path, clock or time.time)
        try:
            ledger._prepare(busy_timeout_s)
        except BaseException:
            conn.close()
            raise
        return ledger

    @staticmethod
    def _connect(path: Path, busy_timeout_s: float, create: bool) -> sqlite3.Connection:
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
            target: str | Path = path
        elif not path.is_file():
            raise StoreError(
                f"no ledger at {path} (nothing recorded there; check --ledger/{LEDGER_ENV})"
            )
        else:  # read-write, never create: a file removed meanwhile is an error, not a new ledger
            target = f"{path.absolute().as_uri()}?mode=rw"
        return sqlite3.connect(
            target,
            timeout=busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,
            uri=not create,
        )

    def _prepare(self, busy_timeout_s: float) -> None:
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000):d}")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._set_wal(busy_timeout_s)
            self._conn.execute("PRAGMA synchronous = FULL")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self._path}: not a usable ledger: {exc}") from exc
        with self._write() as conn:
            migrate(conn, source=str(self._path))

    def _set_wal(self, busy_timeout_s: float) -> None:
        deadline = time.monotonic() + busy_timeout_s
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    @property
    def path(self) -> Path:
        return self._path

    @property
    def schema_version(self) -> int:
        with self._read() as conn:
            return schema_version(conn)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Ledger:
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

    def _now(self) -> str:
        stamp = datetime.fromtimestamp(self._clock(), tz=UTC)
        return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _insert(self, conn: sqlite3.Connection, table: str, values: Mapping[str, Any]) -> int:
        names = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        cur = conn.execute(
            f"INSERT INTO {table} ({names}) VALUES ({marks})", tuple(values.values())
        )
        return int(cur.lastrowid or 0)

    def _query(
        self,
        sql: str,
        params: tuple[Any, ...] = (),
        json_columns: frozenset[str] = JSON_COLUMNS,
    ) -> list[dict[str, Any]]:
        with self._read() as conn:
            cur = conn.execute(sql, params)
            return [decode_row(cur, raw, json_columns) for raw in cur.fetchall()]

    def _one(self, sql: str, params: tuple[Any, ...]) -> dict[str, Any] | None:
        rows = self._query(sql, params)
        return rows[0] if rows else None

    # -- writers: measurements ---------------------------------------------------------------

    def record_deployment(
        self, *, name: str, spec_hash: str | None, action: str, detail: dict[str, Any]
    ) -> int:
        """A bring-up, restart or stop of a deployment (with the spec's hash)."""
        row = {"at": self._now(), "name": name, "spec_hash": spec_hash, "action": action}
        with self._write() as conn:
            return self._insert(conn, "deployments", {**row, "detail": dumps(detail)})

    def record_knob_change(
        self,
        *,
        service: str,
        name: str,
        old: str | None,
        new: str | None,
        reason: str | None,
        case_id: int | None,
        backup_path: str | None,
    ) -> int:
        """A declared knob's value changed in a service's env file (``None``: absent)."""
        row: dict[str, Any] = {"at": self._now(), "service": service, "name": name}
        row |= {"old": old, "new": new}
        row |= {"reason": reason, "case_id": case_id, "backup_path": backup_path}
        with self._write() as conn:
            return self._insert(conn, "knob_changes", row)

    def record_verification(
        self, *, spec_hash: str | None, ok: bool, checks: Sequence[CheckRecord]
    ) -> int:
        """A layered verification and each of its checks (a check's ``detail`` column holds its
        code; rows written before codes hold the sentence)."""
        with self._write() as conn:
            vid = self._insert(
                conn, "verifications", {"at": self._now(), "spec_hash": spec_hash, "ok": int(ok)}
            )
            for check in checks:
                self._insert(conn, "verification_checks", check_row(vid, check))
            return vid

    def record_bench_run(
        self,
        *,
        label: str | None,
        config: dict[str, Any],
        summary: dict[str, Any],
        records: list[dict[str, Any]],
    ) -> int:
        """One bench run with its summary and every per-request record, all or nothing."""
        row: dict[str, Any] = {"at": self._now(), "label": label, "config": dumps(config)}
        row |= {"summary": dumps(summary), "n_records": len(records)}
        with self._write() as conn:
            run_id = self._insert(conn, "bench_runs", row)
            conn.executemany(
                "INSERT INTO bench_records (run_id, seq, record) VALUES (?, ?, ?)",
                ((run_id, seq, dumps(rec)) for seq, rec in enumerate(records)),
            )
            return run_id

    def record_ab(
        self, *, service: str, knob: str, config: Mapping[str, Any], result: AbResultRecord
    ) -> int:
        """An A/B experiment of ``service``'s ``knob`` (result: arms, comparisons, anomalies)."""
        row = {"at": self._now(), "service": service, "knob": knob}
        row |= {"config": dumps(config), "result": dumps(result.to_json())}
        with self._write() as conn:
            return self._insert(conn, "ab_runs", row)

    def record_soak(self, document: SoakDocument, *, case_id: int | None = None) -> int:
        """A soak run (its config, the whole document) and each of its findings; with
        ``case_id``, attached to that case as evidence (its note: the findings' layers, or
        ``no finding``), in the same transaction."""
        ok = document.ok
        row: dict[str, Any] = {"at": self._now(), "ok": None if ok is None else int(ok)}
        row |= {"config": dumps(document.config), "result": dumps(document.to_json())}
        with self._write() as conn:
            if case_id is not None:
                self._require_case(conn, case_id)
            soak_id = self._insert(conn, "soak_runs", row)
            for finding in document.findings:
                self._insert(conn, "soak_findings", finding_row(soak_id, finding))
            if case_id is not None:
                note = ", ".join(str(f.layer) for f in document.findings) or "no finding"
                evidence = {"case_id": case_id, "at": row["at"], "kind": "soak"}
                self._insert(conn, "case_evidence", {**evidence, "ref_id": soak_id, "note": note})
            return soak_id

    # -- writers: cases ----------------------------------------------------------------------

    def create_case(self, *, title: str) -> int:
        """Open a case; returns its id."""
        with self._write() as conn:
            return self._insert(conn, "cases", {"at": self._now(), "title": title})

    def add_suspect(self, *, case_id: int, target: str, reason: str | None) -> int:
        """Put ``target`` (``knob:SERVICE/NAME`` or ``component:NAME``) under suspicion."""
        row = {"case_id": case_id, "at": self._now(), "target": target, "reason": reason}
        with self._write() as conn:
            self._require_case(conn, case_id)
            if conn.execute(
                "SELECT 1 FROM case_suspects WHERE case_id = ? AND target = ?", (case_id, target)
            ).fetchone():
                raise CaseError(f"case {case_id}: {target} is already a suspect")
            return self._insert(conn, "case_suspects", row)

    def add_evidence(self, *, case_id: int, kind: str, ref_id: int | None, note: str | None) -> int:
        """Attach evidence: a bench ``run``, a ``verify``, a ``soak``, an ``ab`` or a ``note``."""
        if kind not in _EVIDENCE_KINDS:
            raise CaseError(f"unknown evidence kind {kind!r}")
        row = {"case_id": case_id, "at": self._now(), "kind": kind, "ref_id": ref_id}
        with self._write() as conn:
            self._require_case(conn, case_id)
            return self._insert(conn, "case_evidence", {**row, "note": note})

    def record_case_event(self, *, case_id: int, kind: str, detail: Mapping[str, Any]) -> int:
        """An action taken under a case (``revert``, ``restore``, ...) and what it produced."""
        row = {"case_id": case_id, "at": self._now(), "kind": kind, "detail": dumps(detail)}
        with self._write() as conn:
            self._require_case(conn, case_id)
            return self._insert(conn, "case_events", row)

    def resolve_case(self, *, case_id: int, root_cause: str, verdicts: Mapping[str, str]) -> None:
        """Close a case with its root cause; ``verdicts`` maps target → exonerated|convicted.

        A case resolved before keeps its earlier resolution (root cause and verdicts) as a
        ``resolved`` case event at that resolution's time, in the same transaction.
        """
        now = self._now()
        with self._write() as conn:
            self._require_case(conn, case_id)
            self._keep_resolution(conn, case_id, now)
            for target, verdict in verdicts.items():
                _set_verdict(conn, case_id, target, verdict, now)
            conn.execute(
                "UPDATE cases SET status = 'resolved', root_cause = ?, resolved_at = ? "
                "WHERE id = ?",
                (root_cause, now, case_id),
            )

    def _keep_resolution(self, conn: sqlite3.Connection, case_id: int, now: str) -> None:
        row = conn.execute(
            "SELECT status, root_cause, resolved_at FROM cases WHERE id = ?", (case_id,)
        ).fetchone()
        if row is None or row[0] != "resolved":
            return
        verdicts = conn.execute(
            "SELECT target, verdict FROM case_suspects WHERE case_id = ? AND verdict IS NOT NULL "
            "ORDER BY id",
            (case_id,),
        ).fetchall()
        earlier = Resolution(row[1], str(row[2] or now), dict(verdicts), superseded_at=now)
        event = {"case_id": case_id, "at": earlier.at, "kind": Resolution.KIND}
        self._insert(conn, "case_events", {**event, "detail": dumps(earlier.to_json())})

    def _require_case(self, conn: sqlite3.Connection, case_id: int) -> None:
        if conn.execute("SELECT 1 FROM cases WHERE id = ?", (case_id,)).fetchone() is None:
            raise CaseError(f"no case {case_id} in {self._path}")

    # -- readers -----------------------------------------------------------------------------

    def get_deployment(self, deployment_id: int) -> DeploymentRecord | None:
        row = self._one("SELECT * FROM deployments WHERE id = ?", (deployment_id,))
        return None if row is None else DeploymentRecord.from_row(row)

    def list_deployments(self) -> list[DeploymentRecord]:
        return [
            DeploymentRecord.from_row(r)
            for r in self._query("SELECT * FROM deployments ORDER BY id")
        ]

    def get_knob_change(self, change_id: int) -> KnobChangeRecord | None:
        row = self._one("SELECT * FROM knob_changes WHERE id = ?", (change_id,))
        return None if row is None else KnobChangeRecord.from_row(row)

    def list_knob_changes(
        self,
        *,
        service: str | None = None,
        name: str | None = None,
        case_id: int | None = None,
    ) -> list[KnobChangeRecord]:
        """Knob changes, oldest first, filtered by any of service, knob name and case."""
        where, params = filters(service=service, name=name, case_id=case_id)
        rows = self._query(f"SELECT * FROM knob_changes{where} ORDER BY id", params)
        return [KnobChangeRecord.from_row(r) for r in rows]

    def get_verification(self, verification_id: int) -> VerificationRecord | None:
        row = self._one("SELECT * FROM verifications WHERE id = ?", (verification_id,))
        return None if row is None else self._verification(row)

    def list_verifications(self) -> list[VerificationRecord]:
        return [
            self._verification(r) for r in self._query("SELECT * FROM verifications ORDER BY id")
        ]

    def _verification(self, row: dict[str, Any]) -> VerificationRecord:
        checks = self._query(
            "SELECT layer, service, ok, detail, data FROM verification_checks "
            "WHERE verification_id = ? ORDER BY id",
            (row["id"],),
            frozenset({"data"}),
        )
        got = VerificationRecord.from_row(row)
        typed = (
            CheckRecord.from_stored(c["layer"], c["service"], c["ok"], c["detail"], c["data"])
            for c in checks
        )
        return dataclasses.replace(got, checks=tuple(typed))

    def get_bench_run(self, run_id: int, *, records: bool = True) -> BenchRunRecord | None:
        row = self._one("SELECT * FROM bench_runs WHERE id = ?", (run_id,))
        if row is not None and records:
            recs = self._query(
                "SELECT record FROM bench_records WHERE run_id = ? ORDER BY seq", (run_id,)
            )
            row["records"] = [r["record"] for r in recs]
        return None if row is None else BenchRunRecord.from_row(row)

    def list_bench_runs(self) -> list[BenchRunRecord]:
        """Bench runs without their per-request records (see :meth:`get_bench_run`)."""
        return [
            BenchRunRecord.from_row(r) for r in self._query("SELECT * FROM bench_runs ORDER BY id")
        ]

    def get_ab(self, ab_id: int) -> AbRunRecord | None:
        row = self._one("SELECT * FROM ab_runs WHERE id = ?", (ab_id,))
        return None if row is None else AbRunRecord.from_row(row)

    def list_ab(self, *, service: str | None = None, knob: str | None = None) -> list[AbRunRecord]:
        where, params = filters(service=service, knob=knob)
        rows = self._query(f"SELECT * FROM ab_runs{where} ORDER BY id", params)
        return [AbRunRecord.from_row(r) for r in rows]

    def get_soak(self, soak_id: int) -> SoakRunRecord | None:
        row = self._one("SELECT * FROM soak_runs WHERE id = ?", (soak_id,))
        return None if row is None else self._soak(row)

    def list_soaks(self) -> list[SoakRunRecord]:
        return [self._soak(r) for r in self._query("SELECT * FROM soak_runs ORDER BY id")]

    def _soak(self, row: dict[str, Any]) -> SoakRunRecord:
        found = self._query(
            "SELECT finding FROM soak_findings WHERE soak_id = ? ORDER BY id", (row["id"],)
        )
        return SoakRunRecord.from_row({**row, "findings": [r["finding"] for r in found]})

    def get_case(self, case_id: int) -> CaseRecord | None:
        row = self._one("SELECT * FROM cases WHERE id = ?", (case_id,))
        return None if row is None else CaseRecord.from_row(row)

    def list_cases(self) -> list[CaseRecord]:
        return [CaseRecord.from_row(r) for r in self._query("SELECT * FROM cases ORDER BY id")]

    def list_suspects(self, case_id: int) -> list[Suspect]:
        rows = self._query("SELECT * FROM case_suspects WHERE case_id = ? ORDER BY id", (case_id,))
        return [Suspect.from_row(r) for r in rows]

    def list_evidence(self, case_id: int) -> list[Evidence]:
        rows = self._query("SELECT * FROM case_evidence WHERE case_id = ? ORDER BY id", (case_id,))
        return [Evidence.from_row(r) for r in rows]

    def list_case_events(self, case_id: int) -> list[CaseEvent]:
        rows = self._query("SELECT * FROM case_events WHERE case_id = ? ORDER BY id", (case_id,))
        return [CaseEvent.from_row(r) for r in rows]

    def snapshot(self, *, records: bool = True) -> LedgerExport:
        """Every record in the ledger (bench runs with their per-request records unless not)."""
        runs = self.list_bench_runs()
        full = [self.get_bench_run(r.id) for r in runs] if records else runs
        return LedgerExport(
            schema_version=self.schema_version,
            path=str(self._path),
            deployments=tuple(self.list_deployments()),
            knob_changes=tuple(self.list_knob_changes()),
            verifications=tuple(self.list_verifications()),
            bench_runs=tuple(r for r in full if r is not None),
            ab_runs=tuple(self.list_ab()),
            soak_runs=tuple(self.list_soaks()),
            cases=tuple(self._case_export(c) for c in self.list_cases()),
        )

    def export(self, *, records: bool = True) -> dict[str, Any]:
        """Everything in the ledger as one JSON-ready document (``servelab ledger export``)."""
        return self.snapshot(records=records).to_json()

    def _case_export(self, case: CaseRecord) -> CaseExport:
        return CaseExport(
            case,
            tuple(self.list_suspects(case.id)),
            tuple(self.list_evidence(case.id)),
            tuple(self.list_case_events(case.id)),
        )


def _set_verdict(
    conn: sqlite3.Connection, case_id: int, target: str, verdict: str, now: str
) -> None:
    if verdict not in {"exonerated", "convicted"}:
        raise CaseError(f"unknown verdict {verdict!r} for {target}")
    cur = conn.execute(
        "UPDATE case_suspects SET verdict = ?, verdict_at = ? WHERE case_id = ? AND target = ?",
        (verdict, now, case_id, target),
    )
    if cur.rowcount == 0:
        conn.execute(
            "INSERT INTO case_suspects (case_id, at, target, reason, verdict, verdict_at) "
            "VALUES (?, ?, ?, NULL, ?, ?)",
            (case_id, now, target, verdict, now),
        )
