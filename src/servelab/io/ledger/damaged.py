"""A ledger row that does not read as its record (a hand edit, a damaged file), in one line.

:meth:`servelab.io.ledger.tables.Table.record` (the one path ``Ledger.get`` and ``Ledger.list``
read records by) turns the codec's misfit into a :class:`~servelab.errors.DamagedRow` naming the
table, the row id, the record and the first field that does not fit: ``ledger: bench_runs row 12
does not read as a bench run (config: not an object); fix or remove it``, never the validator's
dump.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from servelab.errors import DamagedRow, RecordError

__all__ = ["damaged_row", "misfit"]

#: The validator's error types that mean "this should have been a JSON object".
_OBJECT_TYPES = frozenset({"dict_type", "model_type", "dataclass_type", "dataclass_exact_type"})


def _record_words(kind: type[Any]) -> str:
    """``BenchRunRecord`` -> ``bench run``."""
    name = kind.__name__.removesuffix("Record")
    return re.sub(r"(?<!^)(?=[A-Z])", " ", name).lower()


def misfit(exc: BaseException) -> str:
    """The first field of a validation error and what is wrong with it (``config: not an
    object``; more errors: ``and N more``); another error: its first line."""
    cause = exc.__cause__ if isinstance(exc.__cause__, ValidationError) else exc
    if not isinstance(cause, ValidationError):
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    errors = cause.errors(include_url=False)
    if not errors:
        return "does not fit"
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "the row"
    msg = str(first["msg"]).lower()  # a stored JSON field's own check says "not a JSON object"
    what = "not an object" if first["type"] in _OBJECT_TYPES or msg.endswith("json object") else msg
    more = f", and {len(errors) - 1} more" if len(errors) > 1 else ""
    return f"{where}: {what}{more}"


def damaged_row(table: str, row: dict[str, Any], kind: type[Any], exc: RecordError) -> DamagedRow:
    """The one-line error of ``table``'s ``row`` that does not read as a ``kind``."""
    return DamagedRow(
        f"ledger: {table} row {row.get('id', '?')} does not read as a {_record_words(kind)} "
        f"({misfit(exc)}); fix or remove it"
    )
