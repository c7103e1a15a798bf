"""A confirmation asked of a command started with standard input closed (``<&-``) reads end of
input, as with ``</dev/null`` (issue 38, the twenty-fourth pass): ``case revert … <&-`` said
"unexpected RuntimeError: input(): lost sys.stdin" (descriptor 0 was held on ``/dev/null`` but
``sys.stdin`` stayed None). A real ledger and spec, the real CLI; nothing is reverted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.casecli import TARGET, seeded_ledger
from tests.support.casecli import cli_json as _json
from tests.support.specs import write_pd_spec

_CLOSED = 'exec 0<&- "$@"'


def _revert(stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "servelab", "case", "revert", *args]
    if stdin == "closed":
        return subprocess.run(["sh", "-c", _CLOSED, "sh", *argv], capture_output=True, text=True,
                              timeout=120, check=False)  # fmt: skip
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


def test_case_revert_with_stdin_closed_aborts_as_with_dev_null(tmp_path: Path) -> None:
    spec = write_pd_spec(tmp_path / "dep", time_scale=0.02, name="closed-stdin")
    ledger = seeded_ledger(tmp_path / "l" / "ledger.db")
    led = ("--ledger", str(ledger))
    cid = str(_json("case", "open", "agentic hang", *led)["id"])
    _json("case", "suspect", cid, TARGET, "--reason", "latest change", *led)
    env_file = tmp_path / "dep" / "env" / "decode.env"
    before = env_file.read_bytes()
    args = (cid, TARGET, "-f", str(spec), *led)
    null, closed = _revert("null", *args), _revert("closed", *args)
    assert "Aborted!" in null.stderr, null.stderr
    assert "RuntimeError" not in closed.stderr and "lost sys.stdin" not in closed.stderr
    assert "Aborted!" in closed.stderr, closed.stderr
    assert closed.returncode == null.returncode != 0, (closed.returncode, null.returncode)
    assert env_file.read_bytes() == before  # nothing reverted
