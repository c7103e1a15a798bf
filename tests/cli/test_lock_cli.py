"""One operator at a time: real ``servelab`` processes on one deployment at once.

A ``restart`` that waits for its service holds the deployment; a second ``restart`` (or ``up``,
``knob set``) is refused naming it and touches nothing, ``--wait`` queues behind it, ``status``
reads through it, and a lock left by a command killed with SIGKILL is taken over, saying whose it
was."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.io.lock import holder_of
from tests.support import free_ports, run_cli
from tests.support.generic import generic_service, text_or_empty
from tests.support.processes import listening, live_procs_under


def _spec(tmp_path: Path) -> tuple[Path, list[int]]:
    a, b = free_ports(2)
    spec = tmp_path / "servelab.toml"
    spec.write_text(
        'name = "t"\nstate_dir = "state"\n'
        + generic_service("a", a, 'ready_path = "/ready-a"\n')
        + generic_service("b", b, 'ready_path = "/"\ndepends_on = ["a"]\n')
    )
    (tmp_path / "env").mkdir()
    return spec, [a, b]


def _servelab(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    return subprocess.Popen(
        [sys.executable, "-m", "servelab", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=tmp_path, env={"SERVELAB_LEDGER": str(tmp_path / "ledger.db")})


def _until_relaunched(tmp_path: Path, proc: subprocess.Popen[str], before: str) -> None:
    """Until ``proc`` holds the deployment (the lock file names it) and has launched ``a`` again
    (its pid record is a new one)."""
    record = tmp_path / "state" / "run" / "a.json"
    deadline = time.monotonic() + 30
    while (
        (holder := holder_of(tmp_path / "state")) is None
        or holder.pid != proc.pid
        or (text_or_empty(record) in ("", before))
    ):
        assert time.monotonic() < deadline and proc.poll() is None, "it never relaunched a"
        time.sleep(0.05)


@pytest.fixture
def stalled(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A deployment up, and a ``restart a`` holding it while a's readiness fails (its marker
    file gone); the marker comes back, and everything goes down, after the test."""
    spec, ports = _spec(tmp_path)
    marker = tmp_path / "ready-a"
    marker.write_text("ok")
    assert _cli(tmp_path, "up", "-f", str(spec)).returncode == 0
    marker.unlink()
    before = text_or_empty(tmp_path / "state" / "run" / "a.json")
    first = _servelab(tmp_path, "restart", "a", "-f", str(spec), "--no-verify")
    try:
        _until_relaunched(tmp_path, first, before)
        yield spec, first
    finally:
        marker.write_text("ok")
        if first.poll() is None:
            first.communicate(timeout=120)
        _cli(tmp_path, "down", "-f", str(spec), "--wait")
    assert live_procs_under(tmp_path) == []
    assert not any(listening(port) for port in ports)


def test_a_second_restart_is_refused_naming_the_first_and_touches_nothing(
    tmp_path: Path, stalled: tuple[Path, subprocess.Popen[str]]
) -> None:
    spec, first = stalled
    records = {p.name: p.read_text() for p in (tmp_path / "state" / "run").glob("*.json")}
    for argv in (("restart", "a"), ("up",), ("down",)):
        second = _cli(tmp_path, *argv, "-f", str(spec))
        assert second.returncode == 1, second.stderr
        assert f"deployment t is busy: `servelab restart` (pid {first.pid}, since " in " ".join(
            second.stderr.split()
        )
        assert "--wait" in second.stderr
        assert {p.name: p.read_text() for p in (tmp_path / "state" / "run").glob("*.json")} == (
            records
        )
    status = _cli(tmp_path, "status", "-f", str(spec), "--json")  # reads: no lock needed
    assert status.returncode in (0, 1) and "busy" not in status.stderr
    (tmp_path / "ready-a").write_text("ok")
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert _cli(tmp_path, "status", "-f", str(spec)).returncode == 0


def test_wait_queues_behind_the_holder_and_runs_when_it_ends(
    tmp_path: Path, stalled: tuple[Path, subprocess.Popen[str]]
) -> None:
    spec, first = stalled
    queued = _servelab(tmp_path, "down", "b", "-f", str(spec), "--wait")
    assert queued.stderr is not None
    line = queued.stderr.readline()  # told once whom it waits for
    assert f"waiting: `servelab restart` (pid {first.pid}" in line
    assert queued.poll() is None
    (tmp_path / "ready-a").write_text("ok")
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    _, err = queued.communicate(timeout=120)
    assert queued.returncode == 0, err
    holder = holder_of(tmp_path / "state")
    assert holder is None  # both ended: nobody holds it


def test_a_lock_left_by_a_killed_restart_is_taken_over_and_said(
    tmp_path: Path, stalled: tuple[Path, subprocess.Popen[str]]
) -> None:
    spec, first = stalled
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    down = _cli(tmp_path, "down", "-f", str(spec))
    assert down.returncode == 0, down.stderr
    said = " ".join(down.stderr.split())
    assert f"took over the lock {tmp_path / 'state' / 'lock'} from `servelab restart` " in said
    assert f"(pid {first.pid}, since " in said
