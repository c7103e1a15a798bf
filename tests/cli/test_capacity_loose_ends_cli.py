"""Issue 38, the capacity search's loose ends (Known after the twenty-third pass).

- ``--deadline`` no longer than a rate probe's span (``--probe-s``, default 10 s) cut every rate
  probe short without a word: refused before anything runs, exit 2, naming both.
- ``ab --metric capacity`` had no ``--probe-s``: it takes it, checked as ``bench``'s.
- ``--find-capacity --export DIR`` on a nearly full disk failed after the whole search, its
  result never printed: the export's disk is checked before the search, and an export that still
  fails at the end leaves the result printed (exit 1 saying what was not written).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import run_cli
from tests.support.stack import sim_stack
from tests.support.tmpfs import fill, tmpfs

SEARCH = ("bench", "--url", "http://127.0.0.1:9", "--find-capacity", "--slo", "ttft_p99=2s",
          "--concurrency", "8", "--no-ledger")  # fmt: skip


def _one_line(stderr: str) -> None:
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1, stderr


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (("--deadline", "5"), ("--deadline 5 ", "--probe-s 10 (the default)")),
        (("--deadline", "3", "--probe-s", "3"), ("--deadline 3 ", "--probe-s 3 ")),
        (("--deadline", "2.5", "--probe-s", "4"), ("--deadline 2.5 ", "--probe-s 4 ")),
    ],
)
def test_a_deadline_within_a_rate_probe_s_span_is_refused_before_anything_runs(
    extra: tuple[str, ...], said: tuple[str, ...]
) -> None:
    done = run_cli(*SEARCH, "--rate", "4", *extra, timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr)
    for words in said:
        assert words in done.stderr, done.stderr
    assert "cut every rate probe short" in done.stderr and "cannot connect" not in done.stderr
    _one_line(done.stderr)


def test_a_deadline_past_the_span_or_a_concurrency_search_is_not_refused_for_it() -> None:
    """Past the span, the search goes on to the entry point (refused there: nothing listens);
    a concurrency search has no span to cut."""
    for extra in (("--rate", "4", "--deadline", "10.5"), ("--deadline", "1")):
        done = run_cli(*SEARCH, *extra, timeout=60)
        assert done.returncode == 1 and "--deadline" not in done.stderr, (extra, done.stderr)


@pytest.mark.parametrize("command", ["ab", "tune"])
def test_ab_and_tune_on_capacity_take_probe_s_checked_as_bench_does(
    tmp_path: Path, command: str
) -> None:
    """``tune --metric capacity`` had no ``--probe-s`` either (its rate probes took 10 s)."""
    spec = tmp_path / "missing.toml"  # refused before the spec is read
    ab = (command, "-f", str(spec), "--knob", "decode:K=1,2", "--slo", "ttft_p99=2s")
    done = run_cli(*ab, "--metric", "capacity", "--rate", "4", "--probe-s", "5", "--deadline",
                   "3", timeout=60)  # fmt: skip
    assert done.returncode == 2 and "--deadline 3 " in done.stderr, done.stderr
    assert "--probe-s 5 " in done.stderr, done.stderr
    done = run_cli(*ab, "--metric", "capacity", "--rate", "4", "--deadline", "8", timeout=60)
    assert done.returncode == 2 and "--probe-s 10 (the default)" in done.stderr, done.stderr
    for bad in ("0.5", "nan", "-1", "1e308", ""):
        done = run_cli(*ab, "--metric", "capacity", "--rate", "4", "--probe-s", bad, timeout=60)
        assert done.returncode == 2 and "--probe-s" in done.stderr, (bad, done.stderr)
    for without in (("--metric", "capacity"), ("--metric", "goodput", "--rate", "4")):
        done = run_cli(*ab, *without, "--probe-s", "3", timeout=60)
        assert done.returncode == 2, done.stderr
        assert "--probe-s goes with --metric capacity --rate" in done.stderr, done.stderr


@pytest.mark.timeout(300)
def test_a_probe_the_deadline_cut_is_said_cut_not_a_grown_queue(tmp_path: Path) -> None:
    """Issue 38, the twenty-eighth pass: a ``--deadline`` only just over ``--probe-s`` passes
    its check and cuts each probe's last requests; the search blamed "a queue grew". It says
    the deadline cut them, in the conclusion, the row and the ``--json`` (``cut``)."""
    with sim_stack(time_scale=0.2, env={"SERVELAB_SIM_WARMUP_S": "0"}) as stack:
        done = run_cli("bench", "--url", stack.router_url, "--find-capacity", "--slo",
                       "ttft_p99=20s", "--rate", "16", "--requests", "64", "--probe-s", "2",
                       "--deadline", "2.1", "--output-len", "64", "--no-ledger", "--export",
                       str(tmp_path / "out"), timeout=280)  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    doc = json.loads((tmp_path / "out" / "capacity.json").read_text())
    assert "a queue grew" not in doc["conclusion"], doc["conclusion"]
    first = doc["probes"][0]
    assert first["load"] == 16 and first["cut"] > 0.2, doc["probes"]
    assert "the --deadline cut requests before they were answered" in doc["conclusion"]
    assert "longer than --probe-s plus the time a request takes" in doc["conclusion"]
    rows = (tmp_path / "out" / "capacity.md").read_text().splitlines()
    assert any(f", {first['cut']:.0%} cut |" in row for row in rows), rows


@pytest.mark.parametrize("where", ["out", "out/deeper", "kept"])
def test_an_export_to_a_full_disk_is_refused_before_the_search(tmp_path: Path, where: str) -> None:
    """The refusal makes no folder (issue 38, the twenty-eighth pass: it left the empty ``DIR``
    and its parents it had made); a folder that was there stays."""
    with tmpfs(tmp_path / "small", "64k") as small:
        (small / "kept").mkdir()
        fill(small)
        out = small / where
        done = run_cli(*SEARCH, "--export", str(out), timeout=60)
        assert not (out / "capacity.json").exists()
        assert sorted(p.name for p in small.iterdir()) == ["filler", "kept"]
        assert not any((small / "kept").iterdir())
    assert done.returncode == 1, done.stderr
    assert f"cannot write {out}: its disk is full: 0 KiB free" in done.stderr, done.stderr
    assert "cannot connect" not in done.stderr and "127.0.0.1:9" not in done.stderr
    _one_line(done.stderr)


def _until_said(proc: subprocess.Popen[bytes], words: bytes, within_s: float) -> bytes:
    """``proc``'s stderr up to the line holding ``words`` (read as it comes, bounded)."""
    assert proc.stderr is not None
    seen, end = b"", time.monotonic() + within_s
    while words not in seen and time.monotonic() < end and proc.poll() is None:
        ready, _, _ = select.select([proc.stderr], [], [], 0.2)
        if ready:
            seen += os.read(proc.stderr.fileno(), 4096)
    assert words in seen, seen
    return seen


@pytest.mark.timeout(300)
def test_an_export_that_fails_after_the_search_leaves_the_result_printed(tmp_path: Path) -> None:
    """The disk had room before the search and is filled during it (by another writer): the
    search's conclusion and JSON are printed whole, stderr names the files not written, exit 1."""
    with (
        tmpfs(tmp_path / "small", "256k") as small,
        sim_stack(time_scale=0.05, env={"SERVELAB_SIM_WARMUP_S": "0"}) as stack,
    ):
        out = small / "out"
        argv = [sys.executable, "-m", "servelab", "bench", "--url", stack.router_url,
                "--find-capacity", "--slo", "ttft_p99=1s", "--concurrency", "4,32", "--requests",
                "48", "--input-len", "16", "--output-len", "8", "--json", "--no-ledger",
                "--export", str(out)]  # fmt: skip
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            early = _until_said(proc, b"warm-up:", 60)
            fill(small)
            stdout, late = proc.communicate(timeout=240)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
    stderr = (early + late).decode()
    assert proc.returncode == 1, stderr
    doc = json.loads(stdout)
    assert doc["capacity"] is not None and doc["probes"], doc
    assert f"{out}/capacity." in stderr and "No space left" in stderr, stderr
    assert "the search's result is printed above, not saved" in stderr, stderr
    assert "Traceback" not in stderr
