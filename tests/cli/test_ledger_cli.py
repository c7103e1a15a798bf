"""``servelab ledger export|prune|vacuum|stats`` as real processes on real ledger files: exports
that span many write chunks parse back whole, and an output that fails mid-write (a reader that
leaves, a full file system) fails the command loudly and leaves no file that looks complete."""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.case.record import CaseEvidence, CaseRecord
from servelab.core.ledger.codec import encode
from servelab.core.load.records import RequestRecord
from servelab.core.verify.checks import Check, CheckCode, NoEnvFile
from servelab.io.ledger.journal import AbJournal
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.migrations import SCHEMA_VERSION
from servelab.io.ledger.tables import NOW
from tests.support import run_cli

RUNS, PER_RUN = 3, 700


def _records(n: int, run: int) -> list[dict[str, object]]:
    out = []
    for i in range(n):
        sent = 10**14 + run * 10**10 + i * 10**6
        events = [sent + 10**8 + k * 2 * 10**7 + i for k in range(40)]
        out.append(encode(RequestRecord(
            index=i, scheduled_ns=sent - 500, sent_ns=sent, input_tokens=64,
            first_byte_ns=events[0], end_ns=events[-1] + 1, status=200, output_tokens=40,
            event_ns=events, event_tokens=[1] * 40,
        )))  # fmt: skip
    return out


@pytest.fixture(scope="module")
def _seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("seeded") / "ledger.db"
    with Ledger.open(path) as ledger:
        for run in range(RUNS):
            ledger.record_bench_run(label=f"r{run}", config={"run": run}, summary={"ok": 1},
                                    records=_records(PER_RUN, run))  # fmt: skip
        case = ledger.add(CaseRecord(id=0, at=NOW, title="hang", status="open"))
        ledger.add(CaseEvidence(at=NOW, case_id=case, kind="run", ref_id=1, note=None))
    assert sorted(p.name for p in path.parent.iterdir()) == ["ledger.db"]  # no -wal left
    return path


@pytest.fixture
def ledger_file(_seeded: Path, tmp_path: Path) -> Path:
    """A test's own copy of the module's seeded ledger (tests prune and vacuum it)."""
    path = tmp_path / "ledger.db"
    shutil.copyfile(_seeded, path)
    return path


def _ok(*args: str) -> subprocess.CompletedProcess[str]:
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr + done.stdout
    return done


def test_every_format_holds_every_record_across_many_small_writes(
    ledger_file: Path, tmp_path: Path
) -> None:
    led, small = ("--ledger", str(ledger_file)), ("--chunk-bytes", "4096")
    out = tmp_path / "all.json"
    summary = json.loads(_ok("ledger", "export", str(out), *small, *led, "--json").stdout)
    assert summary["records"] == RUNS * PER_RUN and summary["bytes"] == out.stat().st_size
    assert summary["bytes"] > 300 * 4096  # hundreds of chunks, each write checked
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == SCHEMA_VERSION and doc["export_format"] == "json"
    assert [len(r["records"]) for r in doc["bench_runs"]] == [PER_RUN] * RUNS
    assert doc["bench_runs"][2]["records"][-1] == _records(PER_RUN, 2)[-1]
    assert doc["cases"][0]["evidence"][0]["ref_id"] == 1
    stdout = json.loads(_ok("ledger", "export", *small, *led).stdout)  # default: stdout
    assert stdout == doc

    lines = _ok("ledger", "export", "--format", "jsonl", "-", *small, *led).stdout.splitlines()
    rows = [json.loads(line) for line in lines]
    assert rows[0]["table"] == "_export" and rows[0]["schema_version"] == SCHEMA_VERSION
    records = [r for r in rows if r["table"] == "bench_records"]
    assert len(records) == RUNS * PER_RUN and records[0]["record"] == _records(1, 0)[0]

    folder = tmp_path / "csv"
    _ok("ledger", "export", "--format", "csv", str(folder), *small, *led)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["schema_version"] == SCHEMA_VERSION
    assert manifest["rows"]["bench_records.csv"] == RUNS * PER_RUN
    with (folder / "bench_records.csv").open(newline="") as handle:
        table = list(csv.DictReader(handle))
    assert len(table) == RUNS * PER_RUN
    assert json.loads(table[-1]["event_ns"]) == _records(PER_RUN, 2)[-1]["event_ns"]
    assert manifest["rows"]["cases.csv"] == 1


def test_no_records_leaves_them_out(ledger_file: Path) -> None:
    doc = json.loads(_ok("ledger", "export", "--no-records", "--ledger", str(ledger_file)).stdout)
    assert [r["n_records"] for r in doc["bench_runs"]] == [PER_RUN] * RUNS
    assert all("records" not in r for r in doc["bench_runs"])


def test_a_reader_that_leaves_early_fails_the_export(ledger_file: Path) -> None:
    # servelab ledger export - | head -c 100
    with subprocess.Popen(
        [sys.executable, "-m", "servelab", "ledger", "export", "-", "--ledger", str(ledger_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as proc:  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        assert len(proc.stdout.read(100)) == 100
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 1, err
    assert "write to standard output failed after" in err and "closed the pipe" in err


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv"])
def test_a_full_file_system_fails_the_export_and_leaves_nothing(
    ledger_file: Path, full_disk: Path, fmt: str
) -> None:
    target = full_disk / ("out" if fmt == "csv" else f"out.{fmt}")
    done = run_cli("ledger", "export", "--format", fmt, str(target), "--ledger", str(ledger_file))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "No space left on device" in done.stderr and "failed after" in done.stderr
    left = sorted(p.name for p in full_disk.rglob("*") if p.is_file())
    assert left == []  # no export, no temporary file, no manifest


def test_prune_vacuum_and_stats(ledger_file: Path) -> None:
    led = ("--ledger", str(ledger_file))
    before = json.loads(_ok("ledger", "stats", *led, "--json").stdout)
    tables = {t["name"]: t for t in before["tables"]}
    assert tables["bench_records"]["rows"] == RUNS * PER_RUN and before["method"] == "dbstat"
    assert "bench_records" in _ok("ledger", "stats", *led).stdout
    usage = run_cli("ledger", "prune", *led)
    assert usage.returncode == 2 and "exactly one" in usage.stderr
    bad = run_cli("ledger", "prune", "--older-than", "soon", *led)
    assert bad.returncode == 2 and "not an age" in bad.stderr
    assert "nothing to prune" in _ok("ledger", "prune", "--older-than", "30d", *led).stdout
    pruned = json.loads(_ok("ledger", "prune", "--keep-records", "1", *led, "--json").stdout)
    assert pruned["run_ids"] == [2] and pruned["records"] == PER_RUN
    assert pruned["kept_as_evidence"] == [1]  # run 1 is a case's evidence
    vacuumed = json.loads(_ok("ledger", "vacuum", *led, "--json").stdout)
    assert vacuumed["bytes_after"] < vacuumed["bytes_before"]
    after = json.loads(_ok("ledger", "stats", *led, "--json").stdout)
    assert {t["name"]: t["rows"] for t in after["tables"]}["bench_records"] == 2 * PER_RUN
    assert after["runs_pruned"] == 1
    doc = json.loads(_ok("ledger", "export", *led).stdout)
    run2 = doc["bench_runs"][1]
    assert run2["records"] == [] and run2["records_pruned_at"] == pruned["at"]
    assert run2["summary"] == {"ok": 1} and len(doc["cases"]) == 1


def test_csv_needs_a_directory(ledger_file: Path) -> None:
    done = run_cli("ledger", "export", "--format", "csv", "--ledger", str(ledger_file))
    assert done.returncode == 2 and "directory" in done.stderr


def test_an_export_writes_where_it_is_told_and_only_there(
    ledger_file: Path, tmp_path: Path
) -> None:
    """A link is neither replaced nor written through (refused, exit 2: the sixth hostile pass),
    /dev/null stays a device, a shell's ``>(...)`` gets the whole document, and /dev/full fails
    saying so (issue: the atomic rename replaced them)."""
    led = ("--no-records", "--ledger", str(ledger_file))
    target = tmp_path / "kept.json"
    link = tmp_path / "latest.json"
    link.symlink_to(target)
    refused = run_cli("ledger", "export", str(link), *led)
    assert refused.returncode == 2 and "it is a symbolic link" in refused.stderr
    assert link.is_symlink() and not target.exists()
    _ok("ledger", "export", str(target), *led)
    assert json.loads(target.read_text())["cases"][0]["title"] == "hang"
    _ok("ledger", "export", "/dev/null", *led)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    full = run_cli("ledger", "export", "/dev/full", *led)
    assert full.returncode == 1 and "No space left on device" in full.stderr
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    script = f'"$0" -m servelab ledger export >(cat > {tmp_path}/piped.json) {" ".join(led)}'
    piped = subprocess.run(["bash", "-c", script + "; wait $!", sys.executable],
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert json.loads((tmp_path / "piped.json").read_text()) == json.loads(target.read_text())


def test_an_export_onto_the_ledger_itself_is_refused(ledger_file: Path, tmp_path: Path) -> None:
    """``ledger export`` to the ledger's own path (or a link to it, or its -wal) replaced the
    ledger with the JSON and said "exported": it is refused, exit 2, the ledger untouched."""
    before = ledger_file.read_bytes()
    link = tmp_path / "link.db"
    link.symlink_to(ledger_file)
    wal = ledger_file.with_name(ledger_file.name + "-wal")
    for out in (ledger_file, link, wal):
        refused = run_cli("ledger", "export", str(out), "--ledger", str(ledger_file))
        assert refused.returncode == 2, refused.stderr
        assert "is the ledger being exported" in refused.stderr
    assert ledger_file.read_bytes() == before
    assert _ok("ledger", "stats", "--ledger", str(ledger_file)).returncode == 0


def test_every_table_in_every_format_is_strict_json(tmp_path: Path) -> None:
    """A ledger holding a verification (its check's ``detail`` is a code, not JSON: the JSON Lines
    export crashed on it), a bench run whose summary holds NaN (one run's std) and an A/B journal:
    every format names every table, parses as strict JSON (``JSON.parse`` refuses NaN) and holds
    null where the number was not finite."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        check = Check("decode", False, CheckCode.CONFIG_NO_ENV_FILE, NoEnvFile(knobs=True))
        ledger.record_verification(spec_hash="h", ok=False, checks=[check])
        ledger.record_bench_run(label="one", config={"run": 0},
                                summary={"std": math.nan, "hi": math.inf}, records=[])  # fmt: skip
        AbJournal(ledger).start(service="decode", knob="K", config={"x": 1}, original="1")
        tables = set(ledger.table_names())
    led = ("--ledger", str(path))

    def strict(text: str) -> object:
        return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in {text[:80]}"))

    doc = strict(_ok("ledger", "export", *led).stdout)
    assert isinstance(doc, dict) and "null" in doc["nulls"]
    assert doc["bench_runs"][0]["summary"] == {"std": None, "hi": None}
    assert doc["verifications"][0]["checks"][0]["code"] == CheckCode.CONFIG_NO_ENV_FILE

    done = _ok("ledger", "export", "--format", "jsonl", *led)
    rows = [strict(line) for line in done.stdout.splitlines()]
    by_table = {r["table"]: r for r in rows if isinstance(r, dict)}
    assert set(by_table["_export"]["tables"]) == tables  # the header names every table
    assert {"verification_checks", "bench_runs", "ab_sessions"} < set(by_table)
    assert by_table["verification_checks"]["detail"] == CheckCode.CONFIG_NO_ENV_FILE
    assert by_table["bench_runs"]["summary"] == {"std": None, "hi": None}
    assert by_table["ab_sessions"]["config"] == {"x": 1}  # a JSON column: decoded

    folder = tmp_path / "csv"
    _ok("ledger", "export", "--format", "csv", str(folder), *led)
    assert {p.stem for p in folder.glob("*.csv")} == tables
    with (folder / "bench_runs.csv").open(newline="") as fh:
        (run,) = list(csv.DictReader(fh))
    assert strict(run["summary"]) == {"std": None, "hi": None}
    with (folder / "verification_checks.csv").open(newline="") as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["detail"] == CheckCode.CONFIG_NO_ENV_FILE and strict(row["data"]) == {"knobs": True}
