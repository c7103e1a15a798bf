"""``ledger export --format csv`` and a spreadsheet (issue 38, the twenty-eighth pass, M1): a
knob value written as a formula (``=cmd|"/c calc"!A1``) reaches ``knob_changes.csv`` with a
leading ``'``, so a spreadsheet shows it as text instead of running it; a number the ledger holds
(``-1.5``) stays a number. Real processes, nothing running."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.io.ledger.ledger import Ledger
from tests.support import run_cli
from tests.support.specs import write_pd_spec

FORMULA = '=cmd|"/c calc"!A1'


def test_a_formula_knob_value_is_text_in_the_csv_export(tmp_path: Path) -> None:
    spec = write_pd_spec(tmp_path, knobs=(DEFAULT_KNOB,))
    ledger = tmp_path / "ledger.db"
    led = ("--ledger", str(ledger))
    for value in (FORMULA, "@SUM(1+1)", "-1.5", "+2", "-inf"):
        done = run_cli("knob", "set", "-f", str(spec), "decode", f"{DEFAULT_KNOB}={value}", *led)
        assert done.returncode == 0, (done.stdout, done.stderr)
    with Ledger.open(ledger) as opened:
        opened.record_bench_run(label="-neg", config={"run": 0},
                                summary={"std": -1.5, "n": math.nan}, records=[])  # fmt: skip
    folder = tmp_path / "csv"
    done = run_cli("ledger", "export", "--format", "csv", str(folder), *led)
    assert done.returncode == 0, (done.stdout, done.stderr)
    text = (folder / "knob_changes.csv").read_text()
    assert '"=cmd' not in text and ",=" not in text, text
    with (folder / "knob_changes.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    written = {v for row in rows for v in row.values()}
    assert "'" + FORMULA in written and "'@SUM(1+1)" in written, written
    assert "'-inf" in written  # text, not a number: a spreadsheet would read it as a formula
    assert {"-1.5", "+2"} <= written  # plain numbers stay numbers
    assert not any(v.startswith(("=", "@")) for v in written), written
    with (folder / "bench_runs.csv").open(newline="") as fh:
        (run,) = list(csv.DictReader(fh))
    assert run["label"] == "'-neg" and json.loads(run["summary"])["std"] == -1.5, run
