"""``make quick`` runs the fuzz tier and prints its time (issue 38: "the fuzz tier runs in
``make quick`` (its time said)"): read from the Makefile as make would run it (``make -n``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_make_quick_runs_the_fuzz_tier_and_prints_its_time() -> None:
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    done = subprocess.run(["make", "-n", "quick"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    commands = done.stdout.replace("\\\n", " ")
    (fuzz,) = [line for line in commands.splitlines() if "'tests/core/fuzz'" in line]
    assert "fuzz tier (tests/core/fuzz):" in fuzz and "time.monotonic()" in fuzz
    assert "sys.exit(code)" in fuzz  # a failing fuzz test fails make quick
