"""How the ledger's values become SQLite row values and back (JSON columns, booleans, the finding
rows, per-request records in their compact form, ``WHERE`` clauses), and the two small
statements every writer shares (an ``INSERT``, a verdict). :mod:`servelab.io.ledger.ledger` opens
the transactions.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from servelab.core.ledger.codec import encode
from servelab.core.soak.finding import Finding
from servelab.core.telemetry.spans import Span
from servelab.errors import CaseError, StoreError
from servelab.io.ledger.packed import pack_record, unpack_record

__all__ = [
    "JSON_COLUMNS",
    "SPAN_COLUMNS",
    "TABLE_JSON_COLUMNS",
    "decode_record",
    "decode_row",
    "dumps",
    "encode_record",
    "filters",
    "finding_row",
    "insert",
    "insert_spans",
    "set_verdict",
    "span_of_row",
    "span_values",
]

#: Each table's columns that hold JSON text; every other column holds a plain value (a check's
#: ``detail`` is its code, not JSON). The A/B journal's tables (:mod:`servelab.io.ledger.journal`)
#: are here too: an export reads every table.
TABLE_JSON_COLUMNS: Mapping[str, frozenset[str]] = {
    "deployments": frozenset({"detail"}),
    "verification_checks": frozenset({"data"}),
    "bench_runs": frozenset({"config", "summary"}),
    "bench_records": frozenset({"record"}),
    "ab_runs": frozenset({"config", "result"}),
    "soak_runs": frozenset({"config", "result"}),
    "soak_findings": frozenset({"finding"}),
    "case_events": frozenset({"detail"}),
    "spans": frozenset({"attributes"}),
    "ab_sessions": frozenset({"config"}),
    "ab_visits": frozenset({"visit"}),
}
#: The JSON columns of the ledger's own readers' queries (each names the columns it selects).
JSON_COLUMNS = frozenset(
    {"detail", "data", "config", "summary", "result", "finding", "record", "attributes"}
)
#: A ``spans`` row's columns after its owner (``run_id`` or ``soak_id``), in order.
SPAN_COLUMNS = (
    "trace_id", "span_id", "parent_id", "name", "service", "start_ns", "end_ns", "request_id",
    "attributes",
)  # fmt: skip
_BOOL_COLUMNS = frozenset({"ok"})


def _json_default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_json_default)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"cannot record a value that is not JSON: {exc}") from exc


def encode_record(record: Mapping[str, Any]) -> bytes | str:
    """A per-request record as stored: its compact form (a BLOB), else JSON text."""
    return pack_record(record) or dumps(record)


def decode_record(value: bytes | str) -> Any:
    """A stored per-request record back: compact (``bytes``) or JSON text (older ledgers)."""
    try:
        return unpack_record(value) if isinstance(value, bytes) else json.loads(value)
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        raise StoreError(f"a stored request record is damaged: {exc}") from exc


def decode_row(
    cursor: sqlite3.Cursor, raw: tuple[Any, ...], json_columns: frozenset[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for (name, *_), value in zip(cursor.description, raw, strict=True):
        if name == "record" and isinstance(value, bytes):
            value = decode_record(value)
        elif name in json_columns and isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise StoreError(f"column {name!r} holds text that is not JSON: {exc}") from exc
        elif name in _BOOL_COLUMNS and value is not None:
            value = bool(value)
        out[name] = value
    return out


def finding_row(soak_id: int, finding: Finding) -> dict[str, Any]:
    return {
        "soak_id": soak_id,
        "layer": str(finding.layer),
        "confidence": finding.confidence,
        "finding": dumps(encode(finding)),
    }


def span_values(span: Span) -> tuple[Any, ...]:
    """A span's :data:`SPAN_COLUMNS` values (its attributes as compact JSON)."""
    return (
        span.trace_id, span.span_id, span.parent_id, span.name, span.service, span.start_ns,
        span.end_ns, span.request_id, dumps(dict(span.attributes)),
    )  # fmt: skip


def span_of_row(values: tuple[Any, ...]) -> Span:
    """A :class:`Span` back from its :data:`SPAN_COLUMNS` values."""
    trace_id, span_id, parent_id, name, service, start_ns, end_ns, _rid, attributes = values
    try:
        attrs = json.loads(attributes)
    except ValueError as exc:
        raise StoreError(f"a stored span's attributes are damaged: {exc}") from exc
    return Span(
        str(trace_id), str(span_id), str(parent_id), str(name), str(service), int(start_ns),
        int(end_ns), attrs,
    )  # fmt: skip


def filters(**columns: Any) -> tuple[str, tuple[Any, ...]]:
    used = {k: v for k, v in columns.items() if v is not None}
    if not used:
        return "", ()
    return " WHERE " + " AND ".join(f"{k} = ?" for k in used), tuple(used.values())


def insert(conn: sqlite3.Connection, table: str, values: Mapping[str, Any]) -> int:
    """``INSERT`` one row of ``values`` (column -> value); its row id."""
    names = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    cur = conn.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", tuple(values.values()))
    return int(cur.lastrowid or 0)


def insert_spans(
    conn: sqlite3.Connection, owner: str, owner_id: int, spans: Iterable[Span]
) -> None:
    """One ``spans`` row per span, owned by ``owner`` (``run_id`` or ``soak_id``) ``owner_id``."""
    if owner not in {"run_id", "soak_id"}:
        raise ValueError(f"spans belong to a run_id or a soak_id, not {owner!r}")
    names = ", ".join((owner, *SPAN_COLUMNS))
    marks = ", ".join("?" for _ in range(len(SPAN_COLUMNS) + 1))
    conn.executemany(
        f"INSERT INTO spans ({names}) VALUES ({marks})",
        ((owner_id, *span_values(s)) for s in spans),
    )


def set_verdict(
    conn: sqlite3.Connection, case_id: int, target: str, verdict: str, now: str
) -> None:
    """Set ``target``'s verdict in a case (a target not yet a suspect becomes one)."""
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
