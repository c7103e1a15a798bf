"""CLI tests are hermetic: a ``SERVELAB_LEDGER`` of the outer environment never reaches them.

The outer test runs pytest for real, in a child process whose environment names a ledger, on the
inner test below; the inner test (also an ordinary test of the suite) proves it cannot see that
ledger and that a CLI process it starts does not write there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from servelab.io.ledger.connection import LEDGER_ENV
from tests.support import REPO, run_cli

#: Where the outer test tells the inner one its planted ledger is (a name nothing else reads).
PLANTED = "SERVELAB_TEST_PLANTED_LEDGER"


def test_a_cli_test_sees_no_outer_ledger(tmp_path: Path) -> None:
    assert LEDGER_ENV not in os.environ
    opened = run_cli("case", "open", "hermetic probe", cwd=tmp_path)
    assert opened.returncode == 0, opened.stderr
    assert (tmp_path / ".servelab" / "ledger.db").is_file()  # the cwd's state dir, not elsewhere
    planted = os.environ.get(PLANTED)
    if planted:
        assert not Path(planted).exists(), "the CLI wrote the outer environment's ledger"


def test_an_outer_servelab_ledger_does_not_reach_cli_tests(tmp_path: Path) -> None:
    planted = tmp_path / "outer" / "planted.db"
    env = {**os.environ, LEDGER_ENV: str(planted), PLANTED: str(planted)}
    inner = f"{Path(__file__).relative_to(REPO)}::test_a_cli_test_sees_no_outer_ledger"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", inner]
    argv += ["--basetemp", str(tmp_path / "inner")]
    done = subprocess.run(
        argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=100, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
    assert not planted.exists()
