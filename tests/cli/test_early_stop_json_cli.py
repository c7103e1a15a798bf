"""``ab --json`` stopped while Python still imports (the twenty-ninth hostile pass's low: on a
busy machine a stop in the first second printed no JSON document) prints the typed failure
document of a stopped command and exits 128 + the signal: stopped as soon as servelab's start-up
handler is in place (``servelab.startup``), and while the command's own module is imported
(``ServelabGroup``, before ``--json`` was read). Deterministic: the process is SIGSTOPped at the
stage, sent the signal, then SIGCONTed. Real processes (exec'd, not forked)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from servelab.startup import GROUPS, json_command, stopped_document

#: How long a stage is waited for, at most.
_WAIT_S = 60.0


def _caught(pid: int, signum: int) -> bool:
    """Whether ``pid`` has a handler for ``signum`` (``SigCgt`` in its status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def _handled(pid: int) -> bool:
    """servelab's start-up handler is in place (Python itself catches SIGINT, never SIGTERM)."""
    return _caught(pid, signal.SIGTERM)


def _importing_the_command(pid: int) -> bool:
    """The command's module is being imported: pydantic's core (no part of the group's imports)
    is mapped."""
    return "_pydantic_core" in Path(f"/proc/{pid}/maps").read_text()


CONSOLE_SCRIPT = Path(sys.executable).parent / "servelab"


def _stop_at(
    stage: Callable[[int], bool], signum: int, tmp_path: Path, entry: str = "module"
) -> tuple[int, str, str]:
    head = [sys.executable, "-m", "servelab"] if entry == "module" else [str(CONSOLE_SCRIPT)]
    argv = [*head, "ab", "-f", str(tmp_path / "none.toml"), "--knob", "decode:X=1,2", "--json"]
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline, polls = time.monotonic() + _WAIT_S, 0
        while not stage(proc.pid):
            polls += 1
            assert proc.poll() is None, "ended before the stage"
            assert time.monotonic() < deadline and polls < 1_000_000, "the stage never came"
            time.sleep(0.0002)
        os.kill(proc.pid, signal.SIGSTOP)
        os.kill(proc.pid, signum)
        os.kill(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=_WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.parametrize("entry", ["module", "script"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("stage", [_handled, _importing_the_command])
def test_ab_json_stopped_while_it_imports_prints_its_document(
    tmp_path: Path, stage: Callable[[int], bool], signum: int, entry: str
) -> None:
    if entry == "script" and not CONSOLE_SCRIPT.exists():
        pytest.skip("no console script in this environment")
    code, out, err = _stop_at(stage, signum, tmp_path, entry)
    said = "interrupted" if signum == signal.SIGINT else "interrupted by SIGTERM"
    assert code == 128 + signum, (code, out, err)
    doc = json.loads(out)
    assert doc == {"command": "ab", "ok": False, "error": said, "exit_code": 128 + signum,
                   "error_type": "Interrupted"}, doc  # fmt: skip
    assert err.strip().splitlines()[-1] == said, err
    assert "Traceback" not in err, err


def test_the_command_path_of_a_json_command_line() -> None:
    assert json_command(["ab", "-f", "x.toml", "--json"]) == "ab"
    assert json_command(["ledger", "export", "out.json", "--json"]) == "ledger export"
    assert json_command(["--json", "knob", "set", "decode", "X=1"]) == "knob set"
    assert json_command(["ab", "--", "--json"]) is None
    assert json_command(["ab"]) is None and json_command(["--json"]) is None
    assert json_command(['a"b', "--json"]) is None  # a word no command is: no document
    assert json.loads(stopped_document("ledger export", signal.SIGHUP))["exit_code"] == 129


def test_the_groups_are_the_cli_s_groups() -> None:
    import click

    from servelab.cli import COMMANDS

    groups = {name for name, entry in COMMANDS.items() if isinstance(entry.load(), click.Group)}
    assert groups == GROUPS
