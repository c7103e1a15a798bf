"""A reader that goes away (``servelab restart decode 2>&1 | head -1``) never leaves a deployment
down: the twenty-first hostile pass (issue 38) saw the restart stop at the next progress line
(rich's ``SystemExit(1)`` on ``BrokenPipeError``), its router stopped and never started again.
Real processes on one shared PD stack; the pipe is closed by the test after the first line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.record import DeploymentRecord
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from tests.support import run_cli
from tests.support.deployed import deployed
from tests.support.specs import write_pd_spec


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    root = tmp_path_factory.mktemp("closed-output")
    loaded = load_spec(write_pd_spec(root / "dep", time_scale=0.02, name="closed-output"))
    with deployed(loaded):
        yield loaded


def _ledger(stack: LoadedSpec) -> Path:
    return Path(stack.source).parent / "ledger.db"


def _with_output_closed_after_one_line(stack: LoadedSpec, *args: str) -> tuple[int, bytes]:
    """``servelab ARGS -f SPEC 2>&1 | head -1``: stdout and stderr one pipe, which this test
    closes once it has read the first line; the exit code (the process waited for, bounded) and
    that line."""
    env = {**os.environ, "SERVELAB_LEDGER": str(_ledger(stack))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "servelab", *args, "-f", stack.source],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        proc.stdout.close()  # the reader goes away, as head does
        return proc.wait(timeout=120), first
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _all_up(stack: LoadedSpec) -> None:
    status = run_cli("status", "-f", stack.source, "--json")
    rows = json.loads(status.stdout)
    assert {r["service"]: r["ready"] for r in rows} == {
        "prefill": True,
        "decode": True,
        "router": True,
    }, status.stdout
    assert all(r["readiness"]["status"] == 200 for r in rows), status.stdout


def _last(stack: LoadedSpec) -> DeploymentRecord:
    with Ledger.open(_ledger(stack)) as ledger:
        return ledger.list(DeploymentRecord)[-1]


def test_restart_with_its_output_closed_after_one_line_brings_everything_back(
    stack: LoadedSpec,
) -> None:
    code, first = _with_output_closed_after_one_line(stack, "restart", "decode")
    assert first.startswith(b"restart plan: decode -> router"), first
    _all_up(stack)
    assert code == 0  # the command's own code (the restart worked), never 141 nor rich's 1
    row = _last(stack)
    assert row.action == "restart" and row.detail["ok"] is True
    assert [(s["service"], s["outcome"]) for s in row.detail["steps"]] == [
        ("decode", "ok"),
        ("router", "ok"),
    ]


def test_up_with_its_output_closed_after_one_line_starts_what_was_down(stack: LoadedSpec) -> None:
    assert run_cli("down", "router", "-f", stack.source).returncode == 0
    code, _first = _with_output_closed_after_one_line(stack, "up")
    _all_up(stack)
    assert code == 0
    row = _last(stack)
    assert row.action == "up" and row.detail["ok"] is True
