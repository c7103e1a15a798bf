"""``servelab ledger export|prune|vacuum|stats`` as real processes on real ledger files: exports
that span many write chunks parse back whole, in every format, as strict JSON; prune, vacuum and
stats. An output that fails mid-write, or is not a plain file, is
tests/cli/test_ledger_output_cli.py."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import pytest

from servelab.core.verify.checks import Check, CheckCode, NoEnvFile
from servelab.io.ledger.journal import AbJournal
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.migrations import SCHEMA_VERSION
from tests.support import run_cli
from tests.support.ledgerexport import PER_RUN, RUNS, ok, request_records, seed


@pytest.fixture(scope="module")
def _seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return seed(tmp_path_factory.mktemp("seeded") / "ledger.db")


@pytest.fixture
def ledger_file(_seeded: Path, tmp_path: Path) -> Path:
    """A test's own copy of the module's seeded ledger (tests prune and vacuum it)."""
    path = tmp_path / "ledger.db"
    shutil.copyfile(_seeded, path)
    return path


def test_every_format_holds_every_record_across_many_small_writes(
    ledger_file: Path, tmp_path: Path
) -> None:
    led, small = ("--ledger", str(ledger_file)), ("--chunk-bytes", "4096")
    out = tmp_path / "all.json"
    summary = json.loads(ok("ledger", "export", str(out), *small, *led, "--json").stdout)
    assert summary["records"] == RUNS * PER_RUN and summary["bytes"] == out.stat().st_size
    assert summary["bytes"] > 300 * 4096  # hundreds of chunks, each write checked
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == SCHEMA_VERSION and doc["export_format"] == "json"
    assert [len(r["records"]) for r in doc["bench_runs"]] == [PER_RUN] * RUNS
    assert doc["bench_runs"][2]["records"][-1] == request_records(PER_RUN, 2)[-1]
    assert doc["cases"][0]["evidence"][0]["ref_id"] == 1
    stdout = json.loads(ok("ledger", "export", *small, *led).stdout)  # default: stdout
    assert stdout == doc

    lines = ok("ledger", "export", "--format", "jsonl", "-", *small, *led).stdout.splitlines()
    rows = [json.loads(line) for line in lines]
    assert rows[0]["table"] == "_export" and rows[0]["schema_version"] == SCHEMA_VERSION
    records = [r for r in rows if r["table"] == "bench_records"]
    assert len(records) == RUNS * PER_RUN and records[0]["record"] == request_records(1, 0)[0]

    folder = tmp_path / "csv"
    ok("ledger", "export", "--format", "csv", str(folder), *small, *led)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["schema_version"] == SCHEMA_VERSION
    assert manifest["rows"]["bench_records.csv"] == RUNS * PER_RUN
    with (folder / "bench_records.csv").open(newline="") as handle:
        table = list(csv.DictReader(handle))
    assert len(table) == RUNS * PER_RUN
    assert json.loads(table[-1]["event_ns"]) == request_records(PER_RUN, 2)[-1]["event_ns"]
    assert manifest["rows"]["cases.csv"] == 1


def test_no_records_leaves_them_out(ledger_file: Path) -> None:
    doc = json.loads(ok("ledger", "export", "--no-records", "--ledger", str(ledger_file)).stdout)
    assert [r["n_records"] for r in doc["bench_runs"]] == [PER_RUN] * RUNS
    assert all("records" not in r for r in doc["bench_runs"])


def test_prune_vacuum_and_stats(ledger_file: Path) -> None:
    led = ("--ledger", str(ledger_file))
    before = json.loads(ok("ledger", "stats", *led, "--json").stdout)
    tables = {t["name"]: t for t in before["tables"]}
    assert tables["bench_records"]["rows"] == RUNS * PER_RUN and before["method"] == "dbstat"
    assert "bench_records" in ok("ledger", "stats", *led).stdout
    usage = run_cli("ledger", "prune", *led)
    assert usage.returncode == 2 and "exactly one" in usage.stderr
    bad = run_cli("ledger", "prune", "--older-than", "soon", *led)
    assert bad.returncode == 2 and "not an age" in bad.stderr
    assert "nothing to prune" in ok("ledger", "prune", "--older-than", "30d", *led).stdout
    pruned = json.loads(ok("ledger", "prune", "--keep-records", "1", *led, "--json").stdout)
    assert pruned["run_ids"] == [2] and pruned["records"] == PER_RUN
    assert pruned["kept_as_evidence"] == [1]  # run 1 is a case's evidence
    vacuumed = json.loads(ok("ledger", "vacuum", *led, "--json").stdout)
    assert vacuumed["bytes_after"] < vacuumed["bytes_before"]
    after = json.loads(ok("ledger", "stats", *led, "--json").stdout)
    assert {t["name"]: t["rows"] for t in after["tables"]}["bench_records"] == 2 * PER_RUN
    assert after["runs_pruned"] == 1
    doc = json.loads(ok("ledger", "export", *led).stdout)
    run2 = doc["bench_runs"][1]
    assert run2["records"] == [] and run2["records_pruned_at"] == pruned["at"]
    assert run2["summary"] == {"ok": 1} and len(doc["cases"]) == 1


def test_csv_needs_a_directory(ledger_file: Path) -> None:
    done = run_cli("ledger", "export", "--format", "csv", "--ledger", str(ledger_file))
    assert done.returncode == 2 and "directory" in done.stderr


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

    doc = strict(ok("ledger", "export", *led).stdout)
    assert isinstance(doc, dict) and "null" in doc["nulls"]
    assert doc["bench_runs"][0]["summary"] == {"std": None, "hi": None}
    assert doc["verifications"][0]["checks"][0]["code"] == CheckCode.CONFIG_NO_ENV_FILE

    done = ok("ledger", "export", "--format", "jsonl", *led)
    rows = [strict(line) for line in done.stdout.splitlines()]
    by_table = {r["table"]: r for r in rows if isinstance(r, dict)}
    assert set(by_table["_export"]["tables"]) == tables  # the header names every table
    assert {"verification_checks", "bench_runs", "ab_sessions"} < set(by_table)
    assert by_table["verification_checks"]["detail"] == CheckCode.CONFIG_NO_ENV_FILE
    assert by_table["bench_runs"]["summary"] == {"std": None, "hi": None}
    assert by_table["ab_sessions"]["config"] == {"x": 1}  # a JSON column: decoded

    folder = tmp_path / "csv"
    ok("ledger", "export", "--format", "csv", str(folder), *led)
    assert {p.stem for p in folder.glob("*.csv")} == tables
    with (folder / "bench_runs.csv").open(newline="") as fh:
        (run,) = list(csv.DictReader(fh))
    assert strict(run["summary"]) == {"std": None, "hi": None}
    with (folder / "verification_checks.csv").open(newline="") as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["detail"] == CheckCode.CONFIG_NO_ENV_FILE and strict(row["data"]) == {"knobs": True}
