"""What the CLI error tests share (tests/cli/test_errors*.py): every command that reads a spec,
the CLI run as a real process (synchronously, or from an async test beside a loopback server),
and the checks that a failure is one line on stderr and, with ``--json``, a failure document."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from tests.support import arun_cli, run_cli

__all__ = [
    "CASE_AND_LEDGER",
    "COMMANDS",
    "DEPLOY_AND_LOAD",
    "NEEDS_A_LEDGER",
    "arun",
    "check_a_bad_spec",
    "failure_doc",
    "generic_spec",
    "newer_ledger",
    "one_line",
    "run",
]

#: Every command that reads a spec, with the arguments it needs to get that far.
COMMANDS: dict[str, tuple[str, ...]] = {
    "up": ("up",),
    "down": ("down",),
    "status": ("status",),
    "restart": ("restart",),
    "verify": ("verify",),
    "knob get": ("knob", "get", "decode", "X"),
    "knob set": ("knob", "set", "decode", "X=1"),
    "knob diff": ("knob", "diff", "decode", "X"),
    "bench": ("bench",),
    "ab": ("ab", "--knob", "decode:X=1,2"),
    "tune": ("tune", "--knob", "decode:X=1,2"),
    "soak": ("soak",),
    "case open": ("case", "open", "t"),
    "case suspect": ("case", "suspect", "1", "knob:decode/X", "--reason", "r"),
    "case evidence": ("case", "evidence", "1", "--note", "n"),
    "case revert": ("case", "revert", "1", "knob:decode/X", "--yes"),
    "case resolve": ("case", "resolve", "1", "--root-cause", "r"),
    "case test": ("case", "test", "1", "knob:decode/X"),
    "case bisect": ("case", "bisect", "1", "--change", "decode:X=1,2", "--test", "soak"),
    "case show": ("case", "show", "1"),
    "case list": ("case", "list"),
    "restore": ("restore", "1"),
    "investigate": ("investigate", "--yes"),
    "report": ("report",),
    "ledger export": ("ledger", "export"),
    "ledger prune": ("ledger", "prune", "--keep-records", "1"),
    "ledger vacuum": ("ledger", "vacuum"),
    "ledger stats": ("ledger", "stats"),
}

#: The case, restore, investigate, report and ledger commands (tests/cli/test_errors_case_cli.py
#: gives each a bad spec); the others are the deployment's and the load's (test_errors.py).
CASE_AND_LEDGER = sorted(
    k for k in COMMANDS if k.startswith(("case ", "restore", "investigate", "report", "ledger"))
)
DEPLOY_AND_LOAD = sorted(set(COMMANDS) - set(CASE_AND_LEDGER))

#: Commands that only read the ledger, or need a case already in it: they never create one.
NEEDS_A_LEDGER = [k for k in COMMANDS if k.startswith(("case ", "restore", "report", "ledger"))]
NEEDS_A_LEDGER.remove("case open")


#: The outer ledger and debug setting, which a call here runs without.
_UNSET = ("SERVELAB_LEDGER", "SERVELAB_DEBUG")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _UNSET}
    return env | extra


def run(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m servelab ARGS`` in ``cwd``, without the outer ledger or debug setting."""
    return run_cli(*args, cwd=cwd, unset=_UNSET, timeout=timeout)


async def arun(*args: str, cwd: Path) -> tuple[int, str, str]:
    """:func:`run` from an async test (its loopback server keeps serving): code, stdout, stderr."""
    done = await arun_cli(*args, cwd=cwd, unset=_UNSET, timeout=60)
    return done.returncode, done.stdout, done.stderr


def one_line(stderr: str) -> str:
    """The one non-blank line of ``stderr`` (the test fails on a traceback or more lines)."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def failure_doc(stdout: str) -> dict[str, Any]:
    """The ``--json`` failure document on ``stdout`` (``ok`` false, an error said)."""
    doc = json.loads(stdout)
    assert doc["ok"] is False and doc["error"], doc
    return dict(doc)


def newer_ledger(path: Path) -> Path:
    """A SQLite file at ``path`` whose schema version is newer than any servelab's."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    return path


def generic_spec(tmp_path: Path, port: int, start: str, **extra: str) -> Path:
    """``servelab.toml`` in ``tmp_path``: one generic service on ``port`` started by ``start``."""
    (tmp_path / "env").mkdir(exist_ok=True)
    (tmp_path / "env" / "w.env").write_text("", encoding="utf-8")
    lines = [f"{k} = {v}" for k, v in extra.items()]
    spec = tmp_path / "servelab.toml"
    spec.write_text(
        'state_dir = "state"\n[services.w]\nrole = "generic"\n'
        f'url = "http://127.0.0.1:{port}"\nstart = {json.dumps(start)}\n'
        'env_file = "env/w.env"\n' + "\n".join(lines) + "\n",
        encoding="utf-8",
    )
    return spec


def check_a_bad_spec(command: str, as_json: bool, tmp_path: Path) -> None:
    """``command`` given a spec that is not TOML: exit 2, one line on stderr naming the file (with
    ``--json`` the failure document, else nothing on stdout), nothing written."""
    bad = tmp_path / "bad.toml"
    bad.write_text("[services\n", encoding="utf-8")
    json_flag = ("--json",) if as_json else ()
    result = run(*COMMANDS[command], "-f", str(bad), *json_flag, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert line.startswith(f"error: {bad}: not valid TOML"), line
    if as_json:
        doc = failure_doc(result.stdout)
        assert "not valid TOML" in doc["error"] and doc["exit_code"] == 2
    else:
        assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"], "nothing written"
