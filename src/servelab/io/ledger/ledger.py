"""The evidence ledger: one SQLite file holding everything servelab measured and decided.

Deployments, knob changes, verifications (per layer), bench runs with their per-request records,
A/B experiments, soak runs and findings, and cases (suspects, evidence, events, verdicts). The file
is in WAL mode with a busy timeout; every writer commits exactly one ``BEGIN IMMEDIATE``
transaction and returns the new row id, so a process killed mid-write leaves every earlier record
intact and two processes writing at once serialize instead of corrupting anything. The schema is
versioned with ``PRAGMA user_version`` (see :mod:`servelab.io.ledger.migrations`): older ledgers are
migrated on open, newer ones are refused with :class:`~servelab.errors.SchemaError`.

The ledger stores what it is given. Callers pass only declared knob values, never a process
environment: values of undeclared environment variables must not reach these functions. A bench
run, an A/B or a soak that the file refuses when it is recorded (a disk that filled meanwhile) is
kept beside it as JSON (:mod:`servelab.io.ledger.unsaved`), and the error says where.

Readers return the typed records of :mod:`servelab.core.ledger.evidence` (read from each row by
the codec of :mod:`servelab.core.ledger.codec`), oldest first; the A/B and soak results they hold
are typed too, and the writers take them typed. :meth:`Ledger.export` is every record encoded in
one JSON document, built in memory: an export of any size streams
instead, run by run and record by record (:meth:`Ledger.iter_bench_records`,
:meth:`Ledger.iter_rows`, :mod:`servelab.io.ledgerexport`). The OpenTelemetry spans received
during a traced bench run or soak are rows of their own (``spans``, written in the run's
transaction, read back as :class:`~servelab.core.telemetry.traces.Span` by :meth:`Ledger.spans`; the
streaming export carries them, :meth:`Ledger.export` does not). Per-request records are stored
compactly (:func:`servelab.core.load.packed.pack_record`) and decoded when read;
:meth:`Ledger.prune_records`, :meth:`Ledger.vacuum` and :meth:`Ledger.stats` keep the file's size
in hand.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from servelab.core.ab.result import AbResult
from servelab.core.ledger.codec import decode, encode
from servelab.core.ledger.evidence import (
    AbRunRecord,
    BenchRunRecord,
    CaseEvent,
    CaseEvidence,
    CaseExport,
    CaseRecord,
    CheckRecord,
    DeploymentRecord,
    KnobChangeRecord,
    LedgerExport,
    Resolution,
    SoakRunRecord,
    Suspect,
    VerificationRecord,
    read_soak_run,
)
from servelab.core.soak.result import SoakResult
from servelab.core.telemetry.traces import Span
from servelab.core.verify.checks import read_check_row
from servelab.errors import CaseError, StoreError
from servelab.io.ledger.admin import (
    LedgerStats,
    PruneResult,
    VacuumResult,
    compact_batch,
    file_bytes,
    prune_records,
    select_prunable,
    table_stats,
    vacuum,
)
from servelab.io.ledger.connection import (
    LEDGER_ENV,
    LedgerFile,
    default_ledger_path,
    resolve_ledger_path,
)
from servelab.io.ledger.migrations import SCHEMA_VERSION
from servelab.io.ledger.rows import (
    SPAN_COLUMNS,
    TABLE_JSON_COLUMNS,
    check_row,
    decode_record,
    decode_row,
    dumps,
    encode_record,
    filters,
    finding_row,
    insert_spans,
    set_verdict,
    span_of_row,
)
from servelab.io.ledger.unsaved import kept_on_failure

__all__ = [
    "LEDGER_ENV",
    "READ_BATCH",
    "SCHEMA_VERSION",
    "Ledger",
    "default_ledger_path",
    "resolve_ledger_path",
]

#: Rows read per query by the streaming readers (:meth:`Ledger.iter_bench_records`, ...).
READ_BATCH = 2000

#: ``experiment``: a ``case test``; ``probe``, ``bisect``: a ``case bisect``'s probe and its end.
_EVIDENCE_KINDS = frozenset(
    {"run", "verify", "soak", "ab", "note", "experiment", "probe", "bisect"}
)  # fmt: skip


class Ledger(LedgerFile):
    """An open ledger file. Use :meth:`open`; close it (or use it as a context manager)."""

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
        code, ``data`` its data; rows written before codes hold the sentence)."""
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
        spans: Sequence[Span] = (),
    ) -> int:
        """One bench run with its summary, every per-request record and the spans received
        during it (``spans`` rows), all or nothing."""
        row: dict[str, Any] = {"at": self._now(), "label": label, "config": dumps(config)}
        row |= {"summary": dumps(summary), "n_records": len(records)}

        def kept() -> dict[str, Any]:
            spanned = [dataclasses.asdict(span) for span in spans]  # what the rows refused, kept
            return {"label": label, "config": config, "summary": summary, "records": records,
                    "spans": spanned}  # fmt: skip

        with kept_on_failure(self._path, "bench_run", kept), self._write() as conn:
            run_id = self._insert(conn, "bench_runs", row)
            conn.executemany(
                "INSERT INTO bench_records (run_id, seq, record) VALUES (?, ?, ?)",
                ((run_id, seq, encode_record(rec)) for seq, rec in enumerate(records)),
            )
            insert_spans(conn, "run_id", run_id, spans)
            return run_id

    def record_ab(self, *, config: Mapping[str, Any], result: AbResult) -> int:
        """An A/B experiment of ``result.service``'s ``result.knob``; ``config``: the JSON of the
        config it ran with (its type is above this layer)."""
        row = {"at": self._now(), "service": result.service, "knob": result.knob}
        row |= {"config": dumps(config), "result": dumps(encode(result))}

        def kept() -> dict[str, Any]:
            return {"config": config, "result": encode(result)}

        with kept_on_failure(self._path, "ab", kept), self._write() as conn:
            return self._insert(conn, "ab_runs", row)

    def record_soak(
        self,
        result: SoakResult,
        *,
        case_id: int | None = None,
        spans: Sequence[Span] = (),
    ) -> int:
        """A soak run (its config, the whole result, through the codec), each of its findings
        and the spans received during it (``spans`` rows with its ``soak_id``); with ``case_id``,
        attached to that case as evidence (its note: the findings' layers, or ``no finding``), in
        the same transaction."""
        row: dict[str, Any] = {"at": self._now(), "ok": int(result.ok)}
        row |= {"config": dumps(encode(result.config)), "result": dumps(encode(result))}

        def kept() -> dict[str, Any]:
            spanned = [dataclasses.asdict(span) for span in spans]  # what the rows refused, kept
            return {"case_id": case_id, "result": encode(result), "spans": spanned}

        with kept_on_failure(self._path, "soak", kept), self._write() as conn:
            if case_id is not None:
                self._require_case(conn, case_id)
            soak_id = self._insert(conn, "soak_runs", row)
            for finding in result.findings:
                self._insert(conn, "soak_findings", finding_row(soak_id, finding))
            insert_spans(conn, "soak_id", soak_id, spans)
            if case_id is not None:
                note = ", ".join(f.layer for f in result.findings) or "no finding"
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
                set_verdict(conn, case_id, target, verdict, now)
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
        earlier = Resolution(row[1], dict(verdicts), superseded_at=now)
        event = {"case_id": case_id, "at": str(row[2] or now), "kind": Resolution.KIND}
        self._insert(conn, "case_events", {**event, "detail": dumps(encode(earlier))})

    def _require_case(self, conn: sqlite3.Connection, case_id: int) -> None:
        if conn.execute("SELECT 1 FROM cases WHERE id = ?", (case_id,)).fetchone() is None:
            raise CaseError(f"no case {case_id} in {self._path}")

    # -- readers -----------------------------------------------------------------------------

    def get_deployment(self, deployment_id: int) -> DeploymentRecord | None:
        row = self._one("SELECT * FROM deployments WHERE id = ?", (deployment_id,))
        return None if row is None else decode(DeploymentRecord, row)

    def list_deployments(self) -> list[DeploymentRecord]:
        rows = self._query("SELECT * FROM deployments ORDER BY id")
        return [decode(DeploymentRecord, r) for r in rows]

    def get_knob_change(self, change_id: int) -> KnobChangeRecord | None:
        row = self._one("SELECT * FROM knob_changes WHERE id = ?", (change_id,))
        return None if row is None else decode(KnobChangeRecord, row)

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
        return [decode(KnobChangeRecord, r) for r in rows]

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
            read_check_row(c["layer"], c["service"], c["ok"], c["detail"], c["data"])
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
        return None if row is None else decode(BenchRunRecord, row)

    def list_bench_runs(self) -> list[BenchRunRecord]:
        """Bench runs without their per-request records (see :meth:`get_bench_run`)."""
        rows = self._query("SELECT * FROM bench_runs ORDER BY id")
        return [decode(BenchRunRecord, r) for r in rows]

    def get_ab(self, ab_id: int) -> AbRunRecord | None:
        row = self._one("SELECT * FROM ab_runs WHERE id = ?", (ab_id,))
        return None if row is None else decode(AbRunRecord, row)

    def list_ab(self, *, service: str | None = None, knob: str | None = None) -> list[AbRunRecord]:
        where, params = filters(service=service, knob=knob)
        rows = self._query(f"SELECT * FROM ab_runs{where} ORDER BY id", params)
        return [decode(AbRunRecord, r) for r in rows]

    def get_soak(self, soak_id: int) -> SoakRunRecord | None:
        row = self._one("SELECT * FROM soak_runs WHERE id = ?", (soak_id,))
        return None if row is None else self._soak(row)

    def list_soaks(self) -> list[SoakRunRecord]:
        return [self._soak(r) for r in self._query("SELECT * FROM soak_runs ORDER BY id")]

    def _soak(self, row: dict[str, Any]) -> SoakRunRecord:
        found = self._query(
            "SELECT finding FROM soak_findings WHERE soak_id = ? ORDER BY id", (row["id"],)
        )
        return read_soak_run({**row, "findings": [r["finding"] for r in found]})

    def get_case(self, case_id: int) -> CaseRecord | None:
        row = self._one("SELECT * FROM cases WHERE id = ?", (case_id,))
        return None if row is None else decode(CaseRecord, row)

    def list_cases(self) -> list[CaseRecord]:
        return [decode(CaseRecord, r) for r in self._query("SELECT * FROM cases ORDER BY id")]

    def list_suspects(self, case_id: int) -> list[Suspect]:
        rows = self._query("SELECT * FROM case_suspects WHERE case_id = ? ORDER BY id", (case_id,))
        return [decode(Suspect, r) for r in rows]

    def list_evidence(self, case_id: int) -> list[CaseEvidence]:
        rows = self._query("SELECT * FROM case_evidence WHERE case_id = ? ORDER BY id", (case_id,))
        return [decode(CaseEvidence, r) for r in rows]

    def list_case_events(self, case_id: int) -> list[CaseEvent]:
        rows = self._query("SELECT * FROM case_events WHERE case_id = ? ORDER BY id", (case_id,))
        return [decode(CaseEvent, r) for r in rows]

    # -- streaming readers (constant memory whatever the ledger's size) -----------------------

    def iter_bench_records(
        self, run_id: int, *, batch: int = READ_BATCH
    ) -> Iterator[dict[str, Any]]:
        """A run's per-request records in order, read ``batch`` at a time (none once pruned)."""
        after = -1
        while True:
            with self._read() as conn:
                rows = conn.execute(
                    "SELECT seq, record FROM bench_records WHERE run_id = ? AND seq > ? "
                    "ORDER BY seq LIMIT ?",
                    (run_id, after, batch),
                ).fetchall()
            for _seq, value in rows:
                yield decode_record(value)
            if len(rows) < batch:
                return
            after = rows[-1][0]

    def spans(self, *, run_id: int | None = None, soak_id: int | None = None) -> list[Span]:
        """The spans recorded with bench run ``run_id`` or soak ``soak_id``, as received."""
        return list(self.iter_spans(run_id=run_id, soak_id=soak_id))

    def iter_spans(
        self, *, run_id: int | None = None, soak_id: int | None = None, batch: int = READ_BATCH
    ) -> Iterator[Span]:
        """:meth:`spans`, read ``batch`` at a time (none once the run's records are pruned)."""
        if (run_id is None) == (soak_id is None):
            raise ValueError("spans of exactly one of run_id and soak_id")
        owner, owner_id = ("run_id", run_id) if run_id is not None else ("soak_id", soak_id)
        sql = (f"SELECT id, {', '.join(SPAN_COLUMNS)} FROM spans WHERE {owner} = ? AND id > ? "
               "ORDER BY id LIMIT ?")  # fmt: skip
        after = -1
        while True:
            with self._read() as conn:
                rows = conn.execute(sql, (owner_id, after, batch)).fetchall()
            for row in rows:
                yield span_of_row(tuple(row[1:]))
            if len(rows) < batch:
                return
            after = rows[-1][0]

    def table_names(self) -> tuple[str, ...]:
        """The ledger's tables, by name."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            ).fetchall()
        return tuple(str(r[0]) for r in rows)

    def table_columns(self, table: str) -> tuple[str, ...]:
        """``table``'s columns, in order."""
        with self._read() as conn:
            return tuple(str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})"))

    def json_columns(self, table: str) -> frozenset[str]:
        """The columns of ``table`` that hold JSON text (the others hold plain values)."""
        return TABLE_JSON_COLUMNS.get(table, frozenset())

    def iter_rows(
        self, table: str, *, decode: bool = True, batch: int = READ_BATCH
    ) -> Iterator[dict[str, Any]]:
        """Every row of ``table`` as stored, in insertion order, ``batch`` at a time. Its JSON
        columns (:meth:`json_columns`) are decoded unless ``decode=False``; a per-request record
        is always a dict."""
        if table not in self.table_names():
            raise StoreError(f"{self._path}: no table {table!r}")
        json_columns = self.json_columns(table) if decode else frozenset()
        after = -1
        while True:
            with self._read() as conn:
                cur = conn.execute(
                    f"SELECT rowid AS _rowid, * FROM {table} WHERE rowid > ? "
                    "ORDER BY rowid LIMIT ?",
                    (after, batch),
                )
                rows = [decode_row(cur, raw, json_columns) for raw in cur.fetchall()]
            for row in rows:
                after = row.pop("_rowid")
                yield row
            if len(rows) < batch:
                return

    # -- retention ---------------------------------------------------------------------------

    def stats(self) -> LedgerStats:
        """Rows and bytes per table (``servelab ledger stats``)."""
        with self._read() as conn:
            return table_stats(conn, self._path)

    def prune_records(
        self, *, keep_runs: int | None = None, older_than_s: float | None = None
    ) -> PruneResult:
        """Drop the per-request records of every bench run but the ``keep_runs`` newest, or of
        runs older than ``older_than_s`` seconds; summaries, verdicts and cases stay."""
        if (keep_runs is None) == (older_than_s is None):
            raise ValueError("prune by exactly one of keep_runs and older_than_s")
        if keep_runs is not None and keep_runs < 0:
            raise ValueError(f"keep_runs must be >= 0, not {keep_runs}")
        before = None if older_than_s is None else self._now(older_than_s)
        with self._write() as conn:
            ids, kept = select_prunable(conn, keep_runs=keep_runs, before=before)
            return prune_records(conn, ids, kept, self._now())

    def vacuum(self, *, batch: int = READ_BATCH) -> VacuumResult:
        """Rewrite records still stored as JSON compactly, then give free pages back to the
        file system (``VACUUM``); the file's bytes before and after."""
        before = file_bytes(self._path)
        after, compacted = 0, 0
        while True:
            with self._write() as conn:
                after, changed = compact_batch(conn, after, batch)
            compacted += changed
            if after == 0:
                break
        with self._read() as conn:
            vacuum(conn)
        return VacuumResult(before, file_bytes(self._path), compacted)

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
        export: dict[str, Any] = encode(self.snapshot(records=records))
        return export

    def _case_export(self, case: CaseRecord) -> CaseExport:
        return CaseExport(
            **dataclasses.asdict(case),
            suspects=tuple(self.list_suspects(case.id)),
            evidence=tuple(self.list_evidence(case.id)),
            events=tuple(self.list_case_events(case.id)),
        )
