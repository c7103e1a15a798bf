"""Which table holds each kind of ledger record, and how a row becomes the record and back: one
:class:`Table` per record type, so :class:`~servelab.io.ledger.ledger.Ledger`'s generic ``add``,
``get`` and ``list`` serve every feature without a method trio per feature.

A record is written as its encoding (:func:`servelab.core.ledger.codec.encode`): every field but
``id`` (the row's), its JSON columns as compact JSON, its booleans as integers; ``at`` given as
:data:`NOW` is stamped with the ledger's clock. A row is read by the codec (``decode(kind, row)``),
or by the table's own reader where the record gathers rows of another table (a verification's
checks, a soak's findings, a bench run's per-request records). The schema is
:mod:`servelab.io.ledger.migrations`'; nothing here changes what a row holds.

The tables of the verification, A/B and soak records are made each at the first use of
:func:`table_of` for its type, which imports that record then (verify's checks, about a tenth of a
second of CPU; the A/B and soak results' types, about a third): a command that opens the ledger
without reading or writing those (``ledger stats``, ``knob set``, ``case show``) does not pay.

A few records carry rules of their own, checked in the write's transaction: a case's suspect,
evidence and event need the case; a target is a suspect of a case once; evidence is of a known
kind.
"""

from __future__ import annotations

import dataclasses
import functools
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, assert_never

from servelab.core.bench.record import BenchRunRecord
from servelab.core.case.record import CaseEvent, CaseEvidence, CaseRecord, Suspect
from servelab.core.deploy.record import DeploymentRecord
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.ledger.codec import decode, encode
from servelab.errors import CaseError, DamagedRow, RecordError
from servelab.io.ledger.damaged import damaged_row
from servelab.io.ledger.rows import TABLE_JSON_COLUMNS, dumps

if TYPE_CHECKING:
    from servelab.core.soak.record import SoakRunRecord
    from servelab.core.verify.record import CheckRecord, VerificationRecord

__all__ = [
    "EVIDENCE_KINDS",
    "NOW",
    "TABLES",
    "Query",
    "Table",
    "check_row",
    "require_case",
    "table_of",
]

#: ``at`` of a record given to ``Ledger.add``: stamped with the ledger's clock as it is written.
NOW: Final = ""

#: ``experiment``: a ``case test``; ``probe``, ``bisect``: a ``case bisect``'s probe and its end;
#: ``ab_test``: a change's A/B for a slowdown (``investigate --symptom slow``).
EVIDENCE_KINDS = frozenset(
    {"run", "verify", "soak", "ab", "note", "experiment", "probe", "bisect", "ab_test"}
)  # fmt: skip


class Query(Protocol):
    """The ledger's read: rows of ``sql`` as dicts, ``json_columns`` decoded."""

    def __call__(
        self, sql: str, params: tuple[Any, ...] = ..., json_columns: frozenset[str] = ...
    ) -> list[dict[str, Any]]: ...


#: How a row becomes its record: the ledger's read (for rows of other tables), the row, and
#: whether the record is wanted whole (a bench run with its per-request records).
Reader = Callable[[Query, dict[str, Any], bool], Any]
#: A rule checked before a record's row is written, in the same transaction (the ledger's path for
#: its error).
Check = Callable[[sqlite3.Connection, Any, Path], None]


@dataclass(frozen=True)
class Table:
    """Where records of ``kind`` live: the table, the columns ``list`` may filter on, how a row
    is read (default: the codec) and the rule a new row must keep (default: none)."""

    kind: type[Any]
    name: str
    filters: frozenset[str] = frozenset()
    read: Reader | None = None
    check: Check | None = None

    def record(self, query: Query, row: dict[str, Any], whole: bool) -> Any:
        """``row`` read as its record (a row that does not fit: :class:`~servelab.errors.
        DamagedRow`, naming the table and the row)."""
        try:
            return decode(self.kind, row) if self.read is None else self.read(query, row, whole)
        except DamagedRow:
            raise
        except RecordError as exc:
            raise damaged_row(self.name, row, self.kind, exc) from exc

    def row(self, record: Any, now: str) -> dict[str, Any]:
        """``record``'s row: its encoding without ``id``, ``at`` stamped if :data:`NOW`."""
        if not isinstance(record, self.kind):
            raise TypeError(f"{self.name} holds {self.kind.__name__}, not {type(record).__name__}")
        names = {f.name for f in dataclasses.fields(self.kind)} - {"id"}
        encoded = encode(record)
        row = {name: encoded[name] for name in sorted(names) if name in encoded}
        if row.get("at") == NOW:
            row["at"] = now
        json_columns = TABLE_JSON_COLUMNS.get(self.name, frozenset())
        return {k: _column(v, k in json_columns) for k, v in row.items()}


def _column(value: Any, is_json: bool) -> Any:
    if is_json:
        return dumps(value)
    return int(value) if isinstance(value, bool) else value


def require_case(conn: sqlite3.Connection, case_id: int, path: Path) -> None:
    if conn.execute("SELECT 1 FROM cases WHERE id = ?", (case_id,)).fetchone() is None:
        raise CaseError(f"no case {case_id} in {path}")


def _new_suspect(conn: sqlite3.Connection, suspect: Suspect, path: Path) -> None:
    require_case(conn, suspect.case_id, path)
    if conn.execute(
        "SELECT 1 FROM case_suspects WHERE case_id = ? AND target = ?",
        (suspect.case_id, suspect.target),
    ).fetchone():
        raise CaseError(f"case {suspect.case_id}: {suspect.target} is already a suspect")


def _new_evidence(conn: sqlite3.Connection, evidence: CaseEvidence, path: Path) -> None:
    if evidence.kind not in EVIDENCE_KINDS:
        raise CaseError(f"unknown evidence kind {evidence.kind!r}")
    require_case(conn, evidence.case_id, path)


def _new_event(conn: sqlite3.Connection, event: CaseEvent, path: Path) -> None:
    require_case(conn, event.case_id, path)


def check_row(verification_id: int, check: CheckRecord) -> dict[str, Any]:
    """A check's row: its code in ``detail`` and its data through the codec (a check read untyped:
    its code or sentence, and its data, as they were read)."""
    from servelab.core.verify.checks import Check as VerifiedCheck  # the caller's: imported
    from servelab.core.verify.record import UntypedCheck

    stored: str | None
    match check:
        case VerifiedCheck():
            stored, data = check.code.value, encode(check.data)
        case UntypedCheck():
            stored, data = check.code or check.detail, dict(check.data)
        case _:
            assert_never(check)
    return {
        "verification_id": verification_id,
        "layer": check.layer,
        "service": check.service,
        "ok": int(check.ok),
        "detail": stored,
        "data": dumps(data),
    }


def _verification(query: Query, row: dict[str, Any], _whole: bool) -> VerificationRecord:
    from servelab.core.verify.record import VerificationRecord, read_check_row  # by its table

    checks = query(
        "SELECT layer, service, ok, detail, data FROM verification_checks "
        "WHERE verification_id = ? ORDER BY id",
        (row["id"],),
        frozenset({"data"}),
    )
    typed = (read_check_row(c["layer"], c["service"], c["ok"], c["detail"], c["data"])
             for c in checks)  # fmt: skip
    got = decode(VerificationRecord, {**row, "ok": bool(row["ok"]), "checks": []})
    return dataclasses.replace(got, checks=tuple(typed))


def _bench_run(query: Query, row: dict[str, Any], whole: bool) -> BenchRunRecord:
    if whole:
        sql = "SELECT record FROM bench_records WHERE run_id = ? ORDER BY seq"
        row = {**row, "records": [r["record"] for r in query(sql, (row["id"],))]}
    return decode(BenchRunRecord, row)


def _soak_run(query: Query, row: dict[str, Any], _whole: bool) -> SoakRunRecord:
    from servelab.core.soak.record import read_soak_run  # imported by tables() already

    sql = "SELECT finding FROM soak_findings WHERE soak_id = ? ORDER BY id"
    return read_soak_run({**row, "findings": [r["finding"] for r in query(sql, (row["id"],))]})


_CASE = frozenset({"case_id"})

#: The records whose types are light to import, by type: found without importing the others.
_LIGHT: Mapping[type[Any], Table] = {
    table.kind: table
    for table in (
        Table(DeploymentRecord, "deployments"),
        Table(KnobChangeRecord, "knob_changes", frozenset({"service", "name", "case_id"})),
        Table(BenchRunRecord, "bench_runs", read=_bench_run),
        Table(CaseRecord, "cases"),
        Table(Suspect, "case_suspects", _CASE, check=_new_suspect),
        Table(CaseEvidence, "case_evidence", _CASE, check=_new_evidence),
        Table(CaseEvent, "case_events", _CASE, check=_new_event),
    )
}


@functools.cache
def _verification_table() -> Table:
    from servelab.core.verify.record import VerificationRecord

    return Table(VerificationRecord, "verifications", read=_verification)


@functools.cache
def _ab_table() -> Table:
    from servelab.core.ab.record import AbRunRecord

    return Table(AbRunRecord, "ab_runs", frozenset({"service", "knob"}))


@functools.cache
def _soak_table() -> Table:
    from servelab.core.soak.record import SoakRunRecord

    return Table(SoakRunRecord, "soak_runs", read=_soak_run)


#: The records whose types are heavy to import, by the type's module and name: each table made
#: (its record imported) at the first use of its own type, or of :data:`TABLES`.
_HEAVY: Mapping[str, Callable[[], Table]] = {
    "servelab.core.verify.record.VerificationRecord": _verification_table,
    "servelab.core.ab.record.AbRunRecord": _ab_table,
    "servelab.core.soak.record.SoakRunRecord": _soak_table,
}


@functools.cache
def _every_table() -> Mapping[type[Any], Table]:
    heavy = [made() for made in _HEAVY.values()]
    return {**_LIGHT, **{table.kind: table for table in heavy}}


class _Tables(Mapping[type[Any], Table]):
    """Every table, made at the first read (the verification, A/B and soak records imported
    then)."""

    def __getitem__(self, kind: type[Any]) -> Table:
        return _every_table()[kind]

    def __iter__(self) -> Iterator[type[Any]]:
        return iter(_every_table())

    def __len__(self) -> int:
        return len(_every_table())


#: Every record type the ledger stores, by its type (made at the first read: the verification,
#: A/B and soak records, heavy to import, are imported then, not with the ledger).
TABLES: Mapping[type[Any], Table] = _Tables()


def table_of(kind: type[Any]) -> Table:
    """The table of records of ``kind`` (a ``TypeError`` for a type the ledger does not store)."""
    found = _LIGHT.get(kind)
    name = f"{getattr(kind, '__module__', '')}.{getattr(kind, '__qualname__', '')}"
    if found is None and (made := _HEAVY.get(name)):
        found = made() if made().kind is kind else None
    if found is None:
        raise TypeError(f"the ledger stores no {getattr(kind, '__name__', kind)}")
    return found
