"""What the ledger costs as it grows: ledgers of 10^4, 10^5 and 10^6 per-request records.

For each size it builds a ledger of bench runs of 20,000 records each (the real record model,
:class:`~servelab.core.load.records.RequestRecord`, 48 content events per request at ~20 ms apart
with nanosecond jitter, each request's own ``x-request-id`` and ``traceparent`` and its cached
tokens as a bench run records them, inserted a run per transaction) plus a case holding the first
run as evidence, then prints: the file's bytes and bytes per record (stored compact now, compact
as version 1 stored the ids, and as the JSON it used to be), and for each export format the wall
time and peak resident memory of ``servelab ledger export`` run as a child process (that
child's own ``VmHWM``), the export's bytes, and that the
export was parsed back and held every record; then the wall time of ``servelab report`` and
``servelab case show``. Export memory must not grow with the ledger.

    .venv/bin/python benchmarks/ledger_scale.py --sizes 10000,100000,1000000 --dir /work/scratch
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.old_rows import packed_v1  # noqa: E402

from servelab.core.load.identity import request_identity  # noqa: E402
from servelab.core.load.records import RequestRecord  # noqa: E402
from servelab.io.ledger.admin import file_bytes  # noqa: E402
from servelab.io.ledger.ledger import Ledger  # noqa: E402
from servelab.ops.case.case import add_evidence, open_case  # noqa: E402

__all__ = ["build", "main"]

PER_RUN = 20_000
EVENTS = 48
FORMATS = ("json", "jsonl", "csv")
csv.field_size_limit(1 << 30)


_FIELDS = tuple(f.name for f in fields(RequestRecord))
_GAPS = [random.Random(7).randrange(8_000_000, 40_000_000) for _ in range(997)]


def _record(rng: random.Random, run: int, i: int) -> dict[str, object]:
    """One request as a C256 run records it (jitter from a seeded table: fast to make)."""
    scheduled = 250_000_000_000_000 + run * 10**12 + i * 1_000_000
    sent = scheduled + 5_000 + (i * 7919) % 200_000
    first = sent + 30_000_000 + (i * 104_729) % 870_000_000
    stamps, t = [], first
    for k in range(EVENTS):
        stamps.append(t)
        t += _GAPS[(i * 31 + k) % len(_GAPS)]
    rec = RequestRecord(
        index=i, scheduled_ns=scheduled, input_tokens=512, sent_ns=sent, first_byte_ns=first,
        end_ns=t, status=200, output_tokens=EVENTS, tokens_from_usage=True, event_ns=stamps,
        event_tokens=[1] * EVENTS, cached_tokens=(i * 37) % 512,
    )  # fmt: skip
    # encode's dict, without dataclasses.asdict's per-element deep copy (slow at 10^6)
    rec.request_id, rec.traceparent = request_identity(f"{run:016x}", i)
    # record_to_dict's dict, without dataclasses.asdict's per-element deep copy (slow at 10^6)
    return {name: getattr(rec, name) for name in _FIELDS}


def build(path: Path, n: int, seed: int = 0) -> float:
    """A ledger of ``n`` records at ``path``; the seconds it took."""
    rng = random.Random(seed)
    start = time.perf_counter()
    with Ledger.open(path) as ledger:
        for run, lo in enumerate(range(0, n, PER_RUN)):
            records = [_record(rng, run, i) for i in range(min(PER_RUN, n - lo))]
            summary = {"concurrency": 256, "metrics": {"ttft_p99_ms": 900.0}}
            ledger.record_bench_run(label=f"c256-{run}", config={"concurrency": [256]},
                                    summary=summary, records=records)  # fmt: skip
        case = open_case(ledger, "agentic sessions hang")
        add_evidence(ledger, case, "run", 1, "the first run")
    return time.perf_counter() - start


@dataclass
class Child:
    seconds: float
    max_rss_mb: float
    code: int
    stderr: str = field(repr=False, default="")


# The child reports its own peak from /proc/self/status at exit: VmHWM belongs to the address
# space exec made, while ru_maxrss (getrusage, wait4) also counts the parent's pages the child
# held between fork and exec, i.e. this benchmark's own memory.
_MEASURED = """
import atexit, os, sys
def _peak():
    with open("/proc/self/status") as status:
        kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    with open(os.environ["LEDGER_SCALE_PEAK"], "w") as out:
        out.write(str(kb))
atexit.register(_peak)
sys.argv = ["servelab", *sys.argv[1:]]
from servelab.cli import main
main()
"""


def _child(*args: str) -> Child:
    """Run ``servelab ARGS`` as a process of its own; its wall time and its own peak RSS."""
    with tempfile.NamedTemporaryFile(suffix=".peak") as peak:
        env = {**os.environ, "LEDGER_SCALE_PEAK": peak.name}
        start = time.perf_counter()
        argv = [sys.executable, "-c", _MEASURED, *args]
        done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              check=False)  # fmt: skip
        seconds = time.perf_counter() - start
        kb = int(Path(peak.name).read_text() or 0)
    return Child(seconds, kb / 1024, done.returncode, done.stderr.decode())


def _count(fmt: str, out: Path) -> int:
    """Parse the export back (all of it) and count its per-request records."""
    if fmt == "json":
        with out.open() as handle:
            doc = json.load(handle)
        return sum(len(run["records"]) for run in doc["bench_runs"])
    if fmt == "jsonl":
        with out.open() as handle:
            return sum(json.loads(line)["table"] == "bench_records" for line in handle)
    with (out / "bench_records.csv").open(newline="") as handle:
        return sum(1 for row in csv.DictReader(handle) if json.loads(row["event_ns"]))


def _bytes(out: Path) -> int:
    return sum(p.stat().st_size for p in out.iterdir()) if out.is_dir() else out.stat().st_size


def measure(work: Path, n: int) -> dict[str, object]:
    path = work / f"ledger-{n}.db"
    path.unlink(missing_ok=True)
    built = build(path, n)
    stats = Ledger.open(path).stats()
    records = next(t for t in stats.tables if t.name == "bench_records")
    row: dict[str, object] = {"records": n, "build_s": round(built, 1),
                              "file_bytes": file_bytes(path),
                              "bytes_per_record": round((records.bytes or 0) / n, 1)}  # fmt: skip
    for fmt in FORMATS:
        out = work / f"export-{n}.{fmt}"
        shutil.rmtree(out, ignore_errors=True) if out.is_dir() else out.unlink(missing_ok=True)
        got = _child("ledger", "export", "--format", fmt, str(out), "--ledger", str(path))
        assert got.code == 0, got.stderr
        counted = _count(fmt, out)
        assert counted == n, (fmt, counted, n)
        row[fmt] = {"seconds": round(got.seconds, 1), "max_rss_mb": round(got.max_rss_mb),
                    "bytes": _bytes(out), "parsed_records": counted}  # fmt: skip
        shutil.rmtree(out, ignore_errors=True) if out.is_dir() else out.unlink(missing_ok=True)
    report = _child("report", "--ledger", str(path), "--out", str(work / f"report-{n}"))
    show = _child("case", "show", "1", "--ledger", str(path))
    assert report.code == 0 and show.code == 0, report.stderr + show.stderr
    row["report_s"] = round(report.seconds, 2)
    row["case_show_s"] = round(show.seconds, 2)
    return row


def before_after(work: Path, n: int = PER_RUN) -> dict[str, float]:
    """One run of ``n`` records stored as JSON text (as before migration 4), compact with its ids
    as texts (``v1``, before the ids' 8-byte form) and compact now: bytes per record and
    microseconds per record to read them all back, side by side."""
    rng = random.Random(1)
    recs = [_record(rng, 0, i) for i in range(n)]
    out: dict[str, float] = {}
    for form in ("json", "v1", "compact"):
        path = work / f"one-run-{form}.db"
        path.unlink(missing_ok=True)
        with Ledger.open(path) as ledger:
            run = ledger.record_bench_run(label=form, config={}, summary={}, records=recs)
            if form != "compact":
                _rewrite(path, recs, form)
            assert list(ledger.iter_bench_records(run)) == recs
            best = min(_timed(ledger, run) for _ in range(3))
            out[f"read_us_{form}"] = round(best / n * 1e6, 1)
            stored = next(t for t in ledger.stats().tables if t.name == "bench_records")
            out[f"bytes_{form}"] = round((stored.bytes or 0) / n, 1)
    out["ratio"] = round(out["bytes_json"] / out["bytes_compact"], 2)
    out["ratio_v1"] = round(out["bytes_v1"] / out["bytes_compact"], 2)
    return out


def _timed(ledger: Ledger, run: int) -> float:
    start = time.perf_counter()
    for _record in ledger.iter_bench_records(run):
        pass
    return time.perf_counter() - start


def _rewrite(path: Path, recs: list[dict[str, object]], form: str) -> None:
    """Store the run's records as ``form`` wrote them: JSON text, or the version 1 blob."""

    def stored(r: dict[str, object]) -> str | bytes:
        if form == "json":
            return json.dumps(r, sort_keys=True, separators=(",", ":"))
        return packed_v1(RequestRecord(**r))  # type: ignore[arg-type]

    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        "UPDATE bench_records SET record = ? WHERE run_id = 1 AND seq = ?",
        [(stored(r), i) for i, r in enumerate(recs)],
    )
    conn.execute("COMMIT")
    conn.execute("VACUUM")
    conn.close()


def _table(rows: list[dict[str, object]]) -> str:
    head = ["records", "file", "B/record"]
    head += [f"{f} s / peak RSS / bytes" for f in FORMATS] + ["report s", "case show s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [f"{row['records']:,}", f"{int(row['file_bytes']) / 1e6:,.1f} MB",  # type: ignore[call-overload]
                 str(row["bytes_per_record"])]  # fmt: skip
        for fmt in FORMATS:
            got = row[fmt]
            assert isinstance(got, dict)
            cells.append(
                f"{got['seconds']} s / {got['max_rss_mb']} MB / {got['bytes'] / 1e6:,.0f} MB"
            )
        cells += [str(row["report_s"]), str(row["case_show_s"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: a temp)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="ledger-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    print("one run, as JSON, compact v1 and compact now:", before_after(work), flush=True)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        rows.append(measure(work, n))
        print(json.dumps(rows[-1]), flush=True)
    print(_table(rows))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
