"""``servelab ledger …``: the evidence ledger itself.

``export`` streams: bench runs' per-request records (and bench runs' and soaks' received spans)
are read in batches and written as they are
read, so memory stays flat whatever the ledger's size, and every write is checked (a full disk or
a reader that went away exits 1 with the byte count reached; an export to a file goes through a
temporary file removed on failure, so no partial file is left under the name asked for).
``prune`` drops old per-request records (never summaries, verdicts or cases), ``vacuum`` gives
the space back, ``stats`` says what each table holds. Each takes ``--json``.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import click

from servelab.cli.boundary import json_option, print_json
from servelab.cli.common import SpecAndLedger, ledger_option, run_with_ledger, say, spec_option
from servelab.cli.numbers import Whole
from servelab.cli.options import FORCE_HELP
from servelab.core.ledger.codec import encode
from servelab.core.ledger.rawrow import RawRow
from servelab.core.ledger.retention import LedgerStats, PruneResult, VacuumResult
from servelab.io.files import CHUNK_BYTES, Data, write_atomic, write_stream, write_to
from servelab.io.ledger.ledger import Ledger
from servelab.io.overwrite import check_overwrite, link_refusal
from servelab.report.ledger import (
    ChildrenOf,
    ExportSummary,
    csv_chunks,
    export_header,
    jsonl_chunks,
    ledger_json_chunks,
    prune_lines,
    stats_json,
    stats_lines,
    vacuum_line,
)

__all__ = [
    "FORMATS",
    "ledger_group",
    "parse_age",
]

#: ``ledger export --format``: one JSON document, JSON Lines (a line per row), CSV (a file per
#: table in a directory).
FORMATS = ("json", "jsonl", "csv")
_AGE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


#: The oldest age ``--older-than`` may give: a century (``99999999999d`` reached before year 1
#: and ended in "unexpected ValueError: year -273788674 is out of range").
MAX_AGE_S = 100 * 365.25 * 86400


def parse_age(text: str) -> float:
    """``30d``, ``12h``, ``2w``, ``90m``, ``45s`` as seconds (at most :data:`MAX_AGE_S`)."""
    match = _AGE.match(text.lower())
    if match is None:
        raise ValueError(f"{text[:24]!r} is not an age (e.g. 30d, 12h, 2w, 90m)")
    age = float(match[1]) * _UNIT_S[match[2]]  # 400 digits: inf
    if not age <= MAX_AGE_S:
        raise ValueError(f"{text[:24]!r} is over the oldest age allowed, 100 years")
    return age


def _age_option(_ctx: click.Context, _param: click.Parameter, value: str | None) -> float | None:
    try:
        return None if value is None else parse_age(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


class _Counter:
    """Counts the runs and records an export draws from the ledger as they pass."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.runs = 0
        self.records = 0

    def records_of(self, run_id: int) -> Iterator[RawRow]:
        self.runs += 1
        for record in self.ledger.iter_bench_records(run_id):
            self.records += 1
            yield RawRow(record)

    def spans_of(self, run_id: int) -> Iterator[RawRow]:
        return (RawRow(encode(s)) for s in self.ledger.iter_spans(run_id=run_id))

    def soak_spans_of(self, soak_id: int) -> Iterator[RawRow]:
        return (RawRow(encode(s)) for s in self.ledger.iter_spans(soak_id=soak_id))

    def rows(self, table: str) -> Iterator[RawRow]:
        for row in self.ledger.iter_rows(table):
            if table == "bench_records":
                self.records += 1
            elif table == "bench_runs":
                self.runs += 1
            yield RawRow(row)


def _encoded(chunks: Iterable[str]) -> Iterator[bytes]:
    for chunk in chunks:
        yield chunk.encode()


def _tables(ledger: Ledger, records: bool) -> list[str]:
    return [t for t in ledger.table_names() if records or t not in {"bench_records", "spans"}]


def _to(out: str, data: Data, chunk_bytes: int) -> int:
    if out != "-":
        return write_to(Path(out), data, chunk_bytes=chunk_bytes)
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, io.UnsupportedOperation):  # stdout is not a file (embedded use)
        fd = -1
    if fd >= 0:
        return write_stream(fd, data, chunk_bytes=chunk_bytes)
    total = 0
    for chunk in (data,) if isinstance(data, bytes) else data:
        total += sys.stdout.buffer.write(chunk)
    return total


def export_stream(
    ledger: Ledger, fmt: str, out: str, *, records: bool, chunk_bytes: int = CHUNK_BYTES
) -> ExportSummary:
    """Write the ledger as ``fmt`` (``json`` or ``jsonl``) to ``out`` (a file, or ``-``)."""
    counter = _Counter(ledger)
    if fmt == "json":
        export = ledger.snapshot(records=False)
        children: dict[str, dict[str, ChildrenOf]] = {
            "bench_runs": {"spans": counter.spans_of},
            "soak_runs": {"spans": counter.soak_spans_of},
        }
        chunks = ledger_json_chunks(
            export, counter.records_of if records else None, children if records else None
        )
        runs = len(export.bench_runs)
    else:
        names = _tables(ledger, records)
        head = export_header(fmt, ledger.schema_version, str(ledger.path))
        chunks = jsonl_chunks(head, [(t, counter.rows(t)) for t in names])
        runs = -1
    written = _to(out, _encoded(chunks), chunk_bytes)
    runs = counter.runs if runs < 0 else runs
    files = () if out == "-" else (out,)
    return ExportSummary(fmt, out, files, written, runs, counter.records, ledger.schema_version)


def export_csv(
    ledger: Ledger, directory: Path, *, records: bool, chunk_bytes: int = CHUNK_BYTES
) -> ExportSummary:
    """One CSV file per table in ``directory``, then ``manifest.json`` (format, schema version,
    rows per file). On any failure the files this export wrote are removed: no manifest, no
    export."""
    counter, done, rows = _Counter(ledger), [], {}
    total = 0
    try:
        for table in _tables(ledger, records):
            target = directory / f"{table}.csv"
            counting = _CountRows(counter.rows(table))
            columns = ledger.table_columns(table)
            chunks = csv_chunks(table, columns, counting, ledger.json_columns(table))
            total += write_atomic(target, _encoded(chunks), chunk_bytes=chunk_bytes, parents=True)
            done.append(target)
            rows[target.name] = counting.n
        head = export_header("csv", ledger.schema_version, str(ledger.path))
        manifest = {**encode(head), "rows": rows}
        target = directory / "manifest.json"
        total += write_atomic(target, (json.dumps(manifest, indent=2) + "\n").encode())
        done.append(target)
    except BaseException:
        for path in done:
            path.unlink(missing_ok=True)
        raise
    files = tuple(str(p) for p in done)
    return ExportSummary(
        "csv", str(directory), files, total, counter.runs, counter.records, ledger.schema_version
    )


class _CountRows:
    def __init__(self, rows: Iterable[RawRow]) -> None:
        self._rows = rows
        self.n = 0

    def __iter__(self) -> Iterator[RawRow]:
        for row in self._rows:
            self.n += 1
            yield row


@click.group("ledger")
def ledger_group() -> None:
    """The evidence ledger itself: export, prune, vacuum, stats."""


@ledger_group.command("export")
@click.argument("out", default="-")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="json", show_default=True,
              help="json: one document; jsonl: a line per row; csv: a file per table (OUT is "
                   "a directory).")  # fmt: skip
@click.option(
    "--no-records", is_flag=True, help="Leave out per-request records and received spans."
)
@click.option("--chunk-bytes", type=Whole(min=1), default=CHUNK_BYTES, hidden=True)
@click.option("--force", is_flag=True, help=FORCE_HELP)
@spec_option
@ledger_option
@json_option
def ledger_export(
    out: str,
    fmt: str,
    no_records: bool,
    chunk_bytes: int,
    force: bool,
    spec_path: Path | None,
    ledger_path: Path | None,
    as_json: bool,
) -> None:
    """Export the whole ledger to OUT (default ``-``: standard output), streamed.

    With OUT a file and --json, prints what was written (bytes, runs, records)."""
    if not out:  # "" is the current folder to a path: csv wrote its files there
        raise click.BadParameter("is empty: name a file (or a directory for csv), or - for "
                                 "standard output", param_hint="OUT")  # fmt: skip
    if fmt == "csv" and out == "-":
        raise click.BadParameter(
            "csv writes one file per table: give a directory", param_hint="OUT"
        )
    if fmt == "csv" and os.path.lexists(out) and not Path(out).is_dir():
        raise click.BadParameter(  # a file, a FIFO, /dev/full, a dangling link: not a directory
            f"csv writes one file per table into a directory, and {out!r} is not one (give a "
            "directory, or --format json or jsonl for one file)",
            param_hint="OUT",
        )
    if fmt == "csv" and (linked := link_refusal(Path(out))) is not None:
        raise click.BadParameter(linked, param_hint="OUT")  # a link to a folder: not followed

    async def body(ledger: Ledger) -> ExportSummary:
        if fmt == "csv":  # every table's file, by the rule manifest.json was checked by
            for table in _tables(ledger, not no_records):
                check_overwrite(Path(out) / f"{table}.csv", force, makes_folder=True)
            return export_csv(ledger, Path(out), records=not no_records, chunk_bytes=chunk_bytes)
        return export_stream(ledger, fmt, out, records=not no_records, chunk_bytes=chunk_bytes)

    where = SpecAndLedger(spec_path, ledger_path)
    if out != "-" and _is_the_ledger(Path(out), where.ledger_path()):
        raise click.BadParameter(
            "is the ledger being exported (or its -wal/-shm file): writing it would destroy "
            "it; give another path",
            param_hint="OUT",
        )
    if out != "-":
        csv = fmt == "csv"  # its folder is made (its parents too)
        check_overwrite(Path(out) / "manifest.json" if csv else Path(out), force, makes_folder=csv)
    summary = run_with_ledger(where, body, create=False, reads_only=True)
    if out == "-":
        return
    if as_json:
        print_json(summary.json_text())
    else:
        say(summary.line())


def _is_the_ledger(out: Path, ledger: Path) -> bool:
    """``out`` resolves (links followed) to the ledger's file or one of SQLite's beside it."""
    try:
        target = out.resolve()
    except (OSError, RuntimeError):  # a link loop (Python < 3.13: RuntimeError): not the ledger
        return False
    db = ledger.resolve()
    return target in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm"))


@ledger_group.command("prune")
@click.option("--keep-records", "keep_runs", type=Whole(min=0), default=None,
              help="Keep the per-request records of the N newest bench runs only.")  # fmt: skip
@click.option("--older-than", "older_than_s", callback=_age_option, default=None,
              help="Drop the per-request records of runs older than AGE (30d, 12h).")  # fmt: skip
@spec_option
@ledger_option
@json_option
def ledger_prune(
    keep_runs: int | None,
    older_than_s: float | None,
    spec_path: Path | None,
    ledger_path: Path | None,
    as_json: bool,
) -> None:
    """Drop old per-request records; summaries, verdicts and cases are never pruned."""
    if (keep_runs is None) == (older_than_s is None):
        raise click.UsageError("give exactly one of --keep-records N and --older-than AGE")

    async def body(ledger: Ledger) -> PruneResult:
        return ledger.prune_records(keep_runs=keep_runs, older_than_s=older_than_s)

    result = run_with_ledger(SpecAndLedger(spec_path, ledger_path), body, create=False)
    if as_json:
        print_json(encode(result))
        return
    for line in prune_lines(result):
        say(line)


@ledger_group.command("vacuum")
@spec_option
@ledger_option
@json_option
def ledger_vacuum(spec_path: Path | None, ledger_path: Path | None, as_json: bool) -> None:
    """Compact records still in the old JSON form and give free space back to the disk."""

    async def body(ledger: Ledger) -> VacuumResult:
        return ledger.vacuum()

    result = run_with_ledger(SpecAndLedger(spec_path, ledger_path), body, create=False)
    if as_json:
        print_json(encode(result))
        return
    say(vacuum_line(result))


@ledger_group.command("stats")
@spec_option
@ledger_option
@json_option
def ledger_stats(spec_path: Path | None, ledger_path: Path | None, as_json: bool) -> None:
    """Rows and bytes per table (SQLite's dbstat when it has one, else page counts)."""

    async def body(ledger: Ledger) -> LedgerStats:
        return ledger.stats()

    stats = run_with_ledger(
        SpecAndLedger(spec_path, ledger_path), body, create=False, reads_only=True
    )
    if as_json:
        print_json(stats_json(stats))
        return
    for line in stats_lines(stats):
        say(line)
