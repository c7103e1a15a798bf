"""The parallel pass's order (tests/support/order.py, scripts/file_times.py): test files go out
slowest first, each file's tests together and in their own order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.order import TIMES, UNKNOWN_S, load_times, slowest_files_first

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "file_times.py"


def test_files_go_slowest_first_and_keep_their_tests_in_order() -> None:
    items = ["a1", "a2", "b1", "c1", "c2", "c3", "d1"]
    files = {i: f"tests/{name[0]}.py" for i, name in enumerate(items)}
    times = {"tests/a.py": 2.0, "tests/b.py": 40.0, "tests/c.py": 9.0}
    got = slowest_files_first(items, files, times)
    # d is not measured: it counts as UNKNOWN_S, between c (9 s) and a (2 s)
    assert 2.0 < UNKNOWN_S < 9.0
    assert got == ["b1", "c1", "c2", "c3", "d1", "a1", "a2"]
    assert slowest_files_first(items, files, {}) == items  # no times: the collected order


def test_the_measured_times_are_test_files_in_seconds(tmp_path: Path) -> None:
    times = load_times()
    assert times, f"{TIMES} is missing or empty"
    assert all(p.startswith("tests/") and p.endswith(".py") and s > 0 for p, s in times.items())
    assert load_times(tmp_path / "none.json") == {}


def test_the_collection_hands_out_the_slowest_file_first() -> None:
    times = load_times()
    slow, quick = max(times, key=times.__getitem__), "tests/test_order.py"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", quick, slow],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    assert ids[0].startswith(slow + "::") and ids[-1].startswith(quick + "::"), ids


JUNIT = """<testsuites><testsuite>
<testcase classname="tests.cli.test_x" name="t1" time="30.0"/>
<testcase classname="tests.cli.test_x" name="t2[p]" time="10.0"/>
<testcase classname="tests.ops.test_y.TestGroup" name="t" time="25.0"/>
<testcase classname="tests.core.test_z" name="t" time="0.2"/>
</testsuite></testsuites>"""


def test_the_script_sums_a_junit_report_per_file_and_replays_the_order(tmp_path: Path) -> None:
    junit, out = tmp_path / "run.xml", tmp_path / "times.json"
    junit.write_text(JUNIT, encoding="utf-8")
    cmd = [sys.executable, str(SCRIPT), str(junit)]
    wrote = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, check=True)
    # files under 1 s are left out (they count as unknown); the slowest first
    assert json.loads(out.read_text()) == {"tests/cli/test_x.py": 40.0, "tests/ops/test_y.py": 25.0}
    assert str(out) in wrote.stdout
    replay = subprocess.run([*cmd, "--workers", "2"], capture_output=True, text=True, check=True)
    assert "3 files, 65 s in all; slowest first on 2 workers: 40 s" in replay.stdout
