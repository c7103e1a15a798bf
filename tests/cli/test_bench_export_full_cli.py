"""``bench --export DIR`` on a full disk (issue 38, the twenty-eighth pass, M2): the run was
hidden, exit 1 with only the writer's error, the later levels never run, the ledger's run never
named. Now the export's disk is checked before the first request (as the capacity search's), and
an export that fails later stops nothing: every level runs, the result is printed (the table and
the ledger's run ids, or ``--json``), stderr says what was not saved, exit 1. Real processes, a
real tmpfs (root, as CI is)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.support import run_cli
from tests.support.stack import sim_stack
from tests.support.tmpfs import fill, tmpfs

SHAPE = ("--input-len", "16", "--output-len", "8", "--warmup", "1")


def _leave_free(mount: Path, free: int) -> None:
    """``mount`` filled, then ``free`` bytes given back."""
    fill(mount)
    filler = mount / "filler"
    os.truncate(filler, filler.stat().st_size - free)


def test_an_export_to_a_nearly_full_disk_is_refused_before_the_first_request(
    tmp_path: Path,
) -> None:
    with tmpfs(tmp_path / "small", "256k") as small:
        _leave_free(small, 8 * 1024)
        out = small / "b"
        done = run_cli("bench", "--url", "http://127.0.0.1:9", "--concurrency", "2,4",
                       "--requests", "16", *SHAPE, "--no-ledger", "--export", str(out),
                       timeout=60)  # fmt: skip
        assert not (out / "records.jsonl").exists()
    assert done.returncode == 1, done.stderr
    assert f"cannot write {out}: its disk is full: 8 KiB free" in done.stderr, done.stderr
    assert "cannot connect" not in done.stderr and "127.0.0.1:9" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.timeout(300)
@pytest.mark.parametrize("as_json", [False, True])
def test_an_export_that_fails_after_the_first_request_leaves_the_result_printed(
    tmp_path: Path, as_json: bool
) -> None:
    """Room for the pre-flight (136 KiB), not for the records of 2 × 120 requests (about 700 B
    each): a write fails mid-sweep or at its end; every level still runs and is recorded."""
    ledger = tmp_path / "ledger.db"
    with (
        tmpfs(tmp_path / "small", "512k") as small,
        sim_stack(time_scale=0.05, env={"SERVELAB_SIM_WARMUP_S": "0"}) as stack,
    ):
        _leave_free(small, 136 * 1024)
        out = small / "b"
        done = run_cli("bench", "--url", stack.router_url, "--concurrency", "2,4", "--requests",
                       "120", *SHAPE, "--ledger", str(ledger), "--export", str(out),
                       *(("--json",) if as_json else ()), timeout=240)  # fmt: skip
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert f"{out}/" in done.stderr and "No space left on device" in done.stderr, done.stderr
    assert "the bench's result is printed above, not saved" in done.stderr, done.stderr
    if as_json:
        doc = json.loads(done.stdout)
        assert [lv["concurrency"] for lv in doc["levels"]] == [2, 4], doc["levels"]
        assert all(lv["requests"] == 120 and lv["ok"] == 120 for lv in doc["levels"])
    else:
        assert "C2" in done.stdout and "C4" in done.stdout, done.stdout
        said = re.search(r"recorded bench runs #(\d+), #(\d+) in", done.stdout)
        assert said is not None, done.stdout
    listed = run_cli("ledger", "export", "--format", "jsonl", "--no-records", "--ledger",
                     str(ledger))  # fmt: skip
    runs = [r for r in map(json.loads, listed.stdout.splitlines()) if r["table"] == "bench_runs"]
    assert len(runs) == 2, runs
