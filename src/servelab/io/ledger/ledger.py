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

One generic store serves every feature's record (``core/<feature>/record.py``): :meth:`Ledger.add`
writes one, :meth:`Ledger.get` and :meth:`Ledger.list` read them back typed (oldest first), each
through its :class:`~servelab.io.ledger.tables.Table` (its table, filters, reader and rule) and the
codec of :mod:`servelab.core.ledger.codec`; a new record type is one entry there, not a method
trio. The writers that span several tables or keep a refused measurement stay methods of their
own (a verification with its checks, a bench run with its records and spans, an A/B, a soak with
its findings and spans, a case's resolution); the A/B and soak results are typed too.
:meth:`Ledger.export` is every record encoded in one JSON document, built in memory: an export
of any size streams instead, run by run and record by record (:meth:`Ledger.iter_bench_records`,
:meth:`Ledger.iter_rows`, :mod:`servelab.io.ledgerexport`). The OpenTelemetry spans received
during a traced bench run or soak are rows of their own (``spans``, written in the run's
transaction, read back as :class:`~servelab.core.telemetry.spans.Span` by :meth:`Ledger.spans`; the
streaming export carries them, :meth:`Ledger.export` does not). Per-request records are stored
compactly (:func:`servelab.io.ledger.packed.pack_record`) and decoded when read;
:meth:`Ledger.prune_records`, :meth:`Ledger.vacuum` and :meth:`Ledger.stats` keep the file's size
in hand.
"""

from __future__ import annotations

import builtins
import dataclasses
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from servelab.core.bench.record import BenchRunRecord
from servelab.core.case.record import (
    CaseEvent,
    CaseEvidence,
    CaseExport,
    CaseRecord,
    Resolution,
    Suspect,
)
from servelab.core.deploy.record import DeploymentRecord
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.ledger.codec import encode
from servelab.core.ledger.retention import LedgerStats, PruneResult, VacuumResult
from servelab.core.telemetry.spans import Span
from servelab.errors import StoreError
from servelab.io.ledger.admin import (
    compact_batch,
    file_bytes,
    prune_records,
    select_prunable,
    table_stats,
    vacuum,
)
from servelab.io.ledger.connection import (
    LedgerFile,
)
from servelab.io.ledger.rows import (
    SPAN_COLUMNS,
    TABLE_JSON_COLUMNS,
    decode_record,
    decode_row,
    dumps,
    encode_record,
    finding_row,
    insert_spans,
    set_verdict,
    span_of_row,
)
from servelab.io.ledger.rows import (
    filters as rows_where,
)
from servelab.io.ledger.tables import check_row, require_case, table_of
from servelab.io.ledger.unsaved import kept_on_failure

if TYPE_CHECKING:  # the A/B and soak results cost a third of a second to import: only their users
    from servelab.core.ab.result import AbResult
    from servelab.core.ledger.export import LedgerExport
    from servelab.core.soak.result import SoakResult
    from servelab.core.verify.record import CheckRecord

__all__ = [
    "READ_BATCH",
    "Ledger",
]

#: Rows read per query by the streaming readers (:meth:`Ledger.iter_bench_records`, ...).
READ_BATCH = 2000

R = TypeVar("R")


class Ledger(LedgerFile):
    """An open ledger file. Use :meth:`open`; close it (or use it as a context manager)."""

    # -- the generic store: any record type of :mod:`servelab.io.ledger.tables` -----------------

    def add(self, record: object) -> int:
        """Write ``record`` as a new row of its table (``at`` :data:`~servelab.io.ledger.tables.
        NOW`: stamped now; its ``id`` is the row's, returned), after its table's rule."""
        table = table_of(type(record))
        row = table.row(record, self._now())
        with self._write() as conn:
            if table.check is not None:
                table.check(conn, record, self._path)
            return self._insert(conn, table.name, row)

    def get(self, kind: type[R], record_id: int, *, whole: bool = True) -> R | None:
        """The ``kind`` record ``record_id`` (None: none); ``whole=False``: without the rows a
        whole one gathers that can be many (a bench run's per-request records)."""
        table = table_of(kind)
        row = self._one(f"SELECT * FROM {table.name} WHERE id = ?", (record_id,))
        return None if row is None else cast(R, table.record(self._query, row, whole))

    def list(self, kind: type[R], **filters: str | int | None) -> builtins.list[R]:
        """Every ``kind`` record, oldest first, those whose columns equal ``filters`` (a filter
        given None: any value); a bench run without its per-request records (see :meth:`get`)."""
        table = table_of(kind)
        if unknown := set(filters) - table.filters:
            raise TypeError(f"{table.name} are not filtered by {', '.join(sorted(unknown))}")
        where, params = rows_where(**filters)
        rows = self._query(f"SELECT * FROM {table.name}{where} ORDER BY id", params)
        return [cast(R, table.record(self._query, row, False)) for row in rows]

    # -- writers: measurements ---------------------------------------------------------------

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
        records: builtins.list[dict[str, Any]],
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
                require_case(conn, case_id, self._path)
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

    def resolve_case(self, *, case_id: int, root_cause: str, verdicts: Mapping[str, str]) -> None:
        """Close a case with its root cause; ``verdicts`` maps target → exonerated|convicted.

        A case resolved before keeps its earlier resolution (root cause and verdicts) as a
        ``resolved`` case event at that resolution's time, in the same transaction.
        """
        now = self._now()
        with self._write() as conn:
            require_case(conn, case_id, self._path)
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

    # -- readers -----------------------------------------------------------------------------

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

    def spans(
        self, *, run_id: int | None = None, soak_id: int | None = None
    ) -> builtins.list[Span]:
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
        with self._rebuild() as conn:
            vacuum(conn)
        return VacuumResult(before, file_bytes(self._path), compacted)

    def snapshot(self, *, records: bool = True) -> LedgerExport:
        """Every record in the ledger (bench runs with their per-request records unless not)."""
        from servelab.core.ab.record import AbRunRecord  # heavy: only the export needs them
        from servelab.core.ledger.export import LedgerExport
        from servelab.core.soak.record import SoakRunRecord
        from servelab.core.verify.record import VerificationRecord

        runs = self.list(BenchRunRecord)
        full = [self.get(BenchRunRecord, r.id) for r in runs] if records else runs
        return LedgerExport(
            schema_version=self.schema_version,
            path=str(self._path),
            deployments=tuple(self.list(DeploymentRecord)),
            knob_changes=tuple(self.list(KnobChangeRecord)),
            verifications=tuple(self.list(VerificationRecord)),
            bench_runs=tuple(r for r in full if r is not None),
            ab_runs=tuple(self.list(AbRunRecord)),
            soak_runs=tuple(self.list(SoakRunRecord)),
            cases=tuple(self._case_export(c) for c in self.list(CaseRecord)),
        )

    def export(self, *, records: bool = True) -> dict[str, Any]:
        """Everything in the ledger as one JSON-ready document (``servelab ledger export``)."""
        export: dict[str, Any] = encode(self.snapshot(records=records))
        return export

    def _case_export(self, case: CaseRecord) -> CaseExport:
        return CaseExport(
            **dataclasses.asdict(case),
            suspects=tuple(self.list(Suspect, case_id=case.id)),
            evidence=tuple(self.list(CaseEvidence, case_id=case.id)),
            events=tuple(self.list(CaseEvent, case_id=case.id)),
        )
