"""``servelab ledger export``'s document: every record, each check with its reason (no I/O), as
one JSON document, JSON Lines or CSV, produced in chunks so an export of any size streams.

The ledger stores a check's outcome code and data (:mod:`servelab.core.verify.checks`); the export a
person reads says why as well: every verification's checks, a ``restart``'s verification in its
deployment row, and a revert's or restore's failed checks get their ``detail`` sentence
(:func:`servelab.report.verify.check_detail`), and a failed revert or restore its ``error``
(:func:`servelab.report.case.event_error`). Rows from older ledgers keep the sentences they stored.

The chunk producers take the per-request records as iterables (the ledger reads them in batches)
and yield text as they go: nothing here holds more than one record at a time. Every export names
its format and the ledger's schema version (:data:`EXPORT_VERSION` counts changes of the export's
own layout).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeAlias

from pydantic import JsonValue

from servelab.core.ledger.codec import decode, encode
from servelab.core.ledger.jsonvalues import finite
from servelab.core.ledger.rawrow import RawRow
from servelab.core.ledger.retention import LedgerStats, PruneResult, VacuumResult
from servelab.core.load.records import RequestRecord
from servelab.report.jsontext import json_text
from servelab.report.text import csv_text_cell

if TYPE_CHECKING:  # every record of the export: imported by the export's words, when they run
    from servelab.core.ledger.export import LedgerExport

__all__ = [
    "EXPORT_VERSION",
    "RECORD_COLUMNS",
    "ChildrenOf",
    "ExportHeader",
    "ExportSummary",
    "csv_chunks",
    "export_header",
    "jsonl_chunks",
    "ledger_json_chunks",
    "prune_lines",
    "stats_json",
    "stats_lines",
    "vacuum_line",
]

#: The layout of the export files themselves (the ledger's schema has its own version); 3: a
#: JSON export's bench and soak runs carry their received ``spans``; 4: strict JSON everywhere
#: (a number that is not finite is ``null``), every JSON column of every table decoded in JSON
#: Lines and written as JSON text in CSV.
EXPORT_VERSION = 4
#: Why a number can be ``null`` in an export (JSON has no NaN or infinity, and a browser's
#: ``JSON.parse`` refuses them): every export's header says it.
NULL_NUMBERS = (
    "a number that is not finite (the standard deviation of a single run, an interval without "
    "bounds, a ratio of nothing) is null"
)
#: The columns of ``bench_records.csv``: the run, the record's position, its fields, and
#: ``extra`` (a record of another shape, as JSON).
RECORD_COLUMNS = ("run_id", "seq", *(f.name for f in fields(RequestRecord)), "extra")
_RECORD_FIELDS = frozenset(RECORD_COLUMNS[2:-1])

_CASE_ACTIONS = ("revert", "restore")


#: A row of the export (or a part of one) as JSON: a record's encoding, words added.
Row: TypeAlias = dict[str, JsonValue]


def _rows(value: JsonValue) -> list[Row]:
    """The rows of an encoded list of records (each an object: a dataclass's encoding)."""
    return [row for row in value if isinstance(row, dict)] if isinstance(value, list) else []


def _verification(doc: Mapping[str, JsonValue]) -> Row:
    from servelab.report.verify import with_details  # the export's: not `ledger stats`'

    return {**doc, "checks": with_details(doc.get("checks"))}


def _deployment(row: Row) -> Row:
    detail = row.get("detail")
    verification = detail.get("verification") if isinstance(detail, Mapping) else None
    if not isinstance(detail, Mapping) or not isinstance(verification, Mapping):
        return row
    return {**row, "detail": {**detail, "verification": _verification(verification)}}


def _event(row: Row) -> Row:
    detail = row.get("detail")
    if row.get("kind") not in _CASE_ACTIONS or not isinstance(detail, Mapping):
        return row
    from servelab.core.case.model import EventOutcome  # the export's: not `ledger stats`'
    from servelab.report.case import event_error
    from servelab.report.verify import with_details

    shown = {**detail, "error": event_error(decode(EventOutcome, detail))}
    if "failed_checks" in detail:
        shown["failed_checks"] = with_details(detail.get("failed_checks"))
    return {**row, "detail": shown}


def _ledger_doc(export: LedgerExport) -> Row:
    """The export as JSON, with every check's reason, every failed revert's or restore's, and
    every soak's findings worded (:func:`~servelab.report.soak.soak.soak_document`)."""
    from servelab.report.soak.soak import soak_document  # the export's: not `ledger stats`'

    doc: Row = encode(export)
    doc["deployments"] = [_deployment(row) for row in _rows(doc["deployments"])]
    doc["verifications"] = [_verification(row) for row in _rows(doc["verifications"])]
    doc["soak_runs"] = [
        {**row, "result": encode(soak_document(soak.result))}
        for row, soak in zip(_rows(doc["soak_runs"]), export.soak_runs, strict=True)
    ]
    doc["cases"] = [
        {**case, "events": [_event(event) for event in _rows(case["events"])]}
        for case in _rows(doc["cases"])
    ]
    return doc


@dataclass(frozen=True)
class ExportHeader:
    """What every export says about itself (first in its JSON, its JSON Lines' first line, its
    CSV manifest): its format and versions, the ledger it came from, why a number can be null."""

    export_format: str
    export_version: int
    schema_version: int
    path: str
    nulls: str = NULL_NUMBERS


def export_header(fmt: str, schema_version: int, path: str) -> ExportHeader:
    """The header of an export in ``fmt`` of the ledger at ``path``."""
    return ExportHeader(fmt, EXPORT_VERSION, schema_version, path)


def _dump(value: Any) -> str:
    """Compact strict JSON (a value that is not finite: ``null``)."""
    return json.dumps(finite(value), separators=(",", ":"), default=str, allow_nan=False)


#: Where a run's children come from in a JSON export: ``(run id) -> its rows`` (each written as
#: it is: a per-request record as stored, a received span).
ChildrenOf = Callable[[int], Iterable[RawRow]]


def ledger_json_chunks(
    export: LedgerExport,
    records_of: ChildrenOf | None = None,
    children: Mapping[str, Mapping[str, ChildrenOf]] | None = None,
) -> Iterator[str]:
    """The export as one JSON document (its header first; every check's reason, every failed
    revert's or restore's, every soak's findings worded), as text in pieces, with each bench run's
    ``records`` drawn from ``records_of(run_id)`` as it goes (one record per line); None: no
    records. ``children`` adds more per-run lists the same way: ``{"bench_runs": {"spans":
    spans_of}, "soak_runs": {"spans": soak_spans_of}}`` puts each run's received spans in it,
    streamed."""
    doc = _ledger_doc(export)
    head = encode(export_header("json", export.schema_version, export.path))
    kinds = {key: dict(value) for key, value in (children or {}).items()}
    if records_of is not None:
        kinds["bench_runs"] = {"records": records_of, **kinds.get("bench_runs", {})}
    yield "{\n"
    for i, (key, value) in enumerate({**head, **doc}.items()):
        yield ",\n" if i else ""
        yield f"  {json.dumps(key)}: "
        if kinds.get(key):
            yield from _runs_chunks(value, kinds[key])
        else:
            text = json.dumps(finite(value), indent=2, default=str, allow_nan=False)
            yield text.replace("\n", "\n  ")
    yield "\n}\n"


def _runs_chunks(runs: JsonValue, children: Mapping[str, ChildrenOf]) -> Iterator[str]:
    yield "["
    for i, run in enumerate(_rows(runs)):
        yield ",\n    " if i else "\n    "
        yield _dump({k: v for k, v in run.items() if k not in children})[:-1]
        for name, rows_of in children.items():
            yield f',"{name}":['
            for j, row in enumerate(rows_of(int(str(run["id"])))):  # the row's integer id
                yield (",\n      " if j else "\n      ") + _dump(row.values)
            yield "]"
        yield "}"
    yield "\n  ]"


def jsonl_chunks(
    header: ExportHeader, tables: Sequence[tuple[str, Iterable[RawRow]]]
) -> Iterator[str]:
    """JSON Lines: the header (``"table": "_export"``, the names of ``tables`` last), then one
    line per row, each tagged with its ``table`` (a per-request record's row: ``run_id``,
    ``seq``, ``record``)."""
    names = [table for table, _ in tables]
    yield _dump({"table": "_export", **encode(header), "tables": names}) + "\n"
    for table, rows in tables:
        for row in rows:
            yield _dump({"table": table, **row.values}) + "\n"


def _csv_line(values: Iterable[Any]) -> str:
    # Written with "\r\n" so that a cell holding a carriage return is quoted too (the writer
    # quotes only the line terminator's characters), then ended with "\n" like every line.
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerow(csv_text_cell(v) for v in values)
    return buffer.getvalue()[:-2] + "\n"


def _cell(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return _dump(value)
    return "" if finite(value) is None else value


def csv_chunks(
    table: str,
    columns: Sequence[str],
    rows: Iterable[RawRow],
    json_columns: frozenset[str] = frozenset(),
) -> Iterator[str]:
    """One table as CSV: a header line of ``columns``, then a line per row, its ``json_columns``
    (decoded) as strict JSON text. ``bench_records`` gets one column per record field
    (:data:`RECORD_COLUMNS`)."""
    if table == "bench_records":
        yield _csv_line(RECORD_COLUMNS)
        for row in rows:
            yield _csv_line(_record_cells(row))
        return
    yield _csv_line(columns)
    for row in rows:
        values = row.values
        yield _csv_line(_json_cell(values.get(c)) if c in json_columns else _cell(values.get(c))
                        for c in columns)  # fmt: skip


def _json_cell(value: Any) -> str:
    return "" if value is None else _dump(value)


def _record_cells(raw: RawRow) -> list[Any]:
    row = raw.values
    record = row.get("record")
    if not isinstance(record, Mapping) or record.keys() != _RECORD_FIELDS:
        return [row.get("run_id"), row.get("seq"), *[""] * len(_RECORD_FIELDS), _dump(record)]
    return [
        row.get("run_id"),
        row.get("seq"),
        *(_cell(record[c]) for c in RECORD_COLUMNS[2:-1]),
        "",
    ]


@dataclass(frozen=True)
class ExportSummary:
    """What an export wrote: where (``-``: standard output), the files, bytes, runs, records."""

    format: str
    out: str
    files: tuple[str, ...]
    bytes: int
    runs: int
    records: int
    schema_version: int

    def json_text(self) -> str:
        """``ledger export --json``'s summary document."""
        doc = {**encode(self), "files": list(self.files), "export_version": EXPORT_VERSION}
        return json_text(doc)

    def line(self) -> str:
        return (f"exported {self.records:,} record(s) of {self.runs} run(s) to {self.out} "
                f"({self.format}, {self.bytes:,} bytes, schema {self.schema_version})")  # fmt: skip


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def stats_json(stats: LedgerStats) -> str:
    """``ledger stats --json``."""
    return json_text({**encode(stats), "tables": [encode(t) for t in stats.tables]})


def stats_lines(stats: LedgerStats) -> list[str]:
    """``ledger stats``: the file, then rows and bytes per table."""
    how = "dbstat" if stats.method == "dbstat" else "page counts only: no per-table bytes"
    pages = f"{stats.pages:,} pages of {stats.page_size} B ({stats.free_pages:,} free; {how})"
    lines = [f"{stats.path}: {_size(stats.file_bytes)}, schema {stats.schema_version}, {pages}"]
    width = max((len(t.name) for t in stats.tables), default=5)
    for table in stats.tables:
        lines.append(f"  {table.name:<{width}}  {table.rows:>12,} rows  {_size(table.bytes):>9}")
    if stats.runs_pruned:
        lines.append(f"{stats.runs_pruned} bench run(s) had their per-request records pruned")
    if stats.records_legacy:
        lines.append(f"{stats.records_legacy:,} record(s) stored in the old JSON form "
                     "(ledger vacuum compacts them)")  # fmt: skip
    return lines


def prune_lines(result: PruneResult) -> list[str]:
    """``ledger prune``: what went and what stayed."""
    if not result.run_ids:
        lines = ["nothing to prune"]
    else:
        runs = ", ".join(str(i) for i in result.run_ids)
        spans = f" and {result.spans:,} span(s)" if result.spans else ""
        lines = [f"pruned {result.records:,} per-request record(s){spans} of "
                 f"{len(result.run_ids)} run(s) ({runs}); their summaries stay"]  # fmt: skip
    if result.kept_as_evidence:
        kept = ", ".join(str(i) for i in result.kept_as_evidence)
        lines.append(f"kept the records of run(s) {kept}: case evidence")
    return lines


def vacuum_line(result: VacuumResult) -> str:
    """``ledger vacuum``: the file before and after."""
    compacted = (
        f", {result.records_compacted:,} record(s) compacted" if result.records_compacted else ""
    )
    return f"vacuumed: {_size(result.bytes_before)} -> {_size(result.bytes_after)}{compacted}"
