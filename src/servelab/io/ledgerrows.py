"""How the ledger's values become SQLite row values and back (JSON columns, booleans, the check
and finding rows, ``WHERE`` clauses). No connection here: :mod:`servelab.io.ledger` runs the SQL.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

from servelab.core.evidence import CheckRecord
from servelab.core.results import SoakFinding
from servelab.errors import StoreError

__all__ = ["JSON_COLUMNS", "check_row", "decode_row", "dumps", "filters", "finding_row"]

JSON_COLUMNS = frozenset({"detail", "data", "config", "summary", "result", "finding", "record"})
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


def decode_row(
    cursor: sqlite3.Cursor, raw: tuple[Any, ...], json_columns: frozenset[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for (name, *_), value in zip(cursor.description, raw, strict=True):
        if name in json_columns and isinstance(value, str):
            value = json.loads(value)
        elif name in _BOOL_COLUMNS and value is not None:
            value = bool(value)
        out[name] = value
    return out


def check_row(verification_id: int, check: CheckRecord) -> dict[str, Any]:
    return {
        "verification_id": verification_id,
        "layer": check.layer,
        "service": check.service,
        "ok": int(check.ok),
        "detail": check.stored,
        "data": dumps(dict(check.data)),
    }


def finding_row(soak_id: int, finding: SoakFinding) -> dict[str, Any]:
    return {
        "soak_id": soak_id,
        "layer": finding.layer,
        "confidence": finding.confidence,
        "finding": dumps(finding.to_json()),
    }


def filters(**columns: Any) -> tuple[str, tuple[Any, ...]]:
    used = {k: v for k, v in columns.items() if v is not None}
    if not used:
        return "", ()
    return " WHERE " + " AND ".join(f"{k} = ?" for k in used), tuple(used.values())
