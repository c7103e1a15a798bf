"""A state directory on a disk that fills up (issue 38, the tenth pass), as real processes on a
real full tmpfs (mounting one needs root, as CI has).

- ``restart`` whose pid record cannot be written once the service is launched: the process it
  just started is stopped (never left running unrecorded), and the error names it and what is
  down, in one line and under ``--json``; ``down`` then finds nothing of servelab's serving.
- ``down`` on a full state disk (the lock's holder cannot be written, nor the ledger row): it
  still stops every service, saying in one line what it could not write; never a raw OSError.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.cli.test_restart_writes_cli import SLOW_STOP, _wait_for
from tests.support import free_ports, run_cli
from tests.support.generic import generic_service, servelab_process
from tests.support.tmpfs import fill, tmpfs


@pytest.fixture
def tiny(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs at ``tmp_path/state`` (a deployment's state dir)."""
    with tmpfs(tmp_path / "state") as mount:
        yield mount


def _spec(tmp_path: Path, slow_b: bool = False) -> tuple[Path, dict[str, int]]:
    """Services a and b (b depends on a); ``slow_b``: b, on SIGTERM, waits for ``go``."""
    a, b = free_ports(2)
    b_table = generic_service("b", b, 'ready_path = "/"\ndepends_on = ["a"]\n')
    if slow_b:
        (tmp_path / "slow.py").write_text(SLOW_STOP)
        start = f"exec {sys.executable} {tmp_path / 'slow.py'} {b} {tmp_path}"
        b_table = (
            f'[services.b]\nrole = "generic"\nurl = "http://127.0.0.1:{b}"\n'
            f'start = \'{start}\'\nready_path = "/"\ndepends_on = ["a"]\n'
        )
    spec = tmp_path / "servelab.toml"
    spec.write_text(
        'name = "t"\nstate_dir = "state"\n'
        + generic_service("a", a, 'ready_path = "/"\n')
        + b_table
    )
    return spec, {"a": a, "b": b}


def _env(tmp_path: Path) -> dict[str, str]:
    return {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}


def _serving(port: int) -> int | None:
    """The pid listening on 127.0.0.1:``port`` (None: none), from ``ss``."""
    out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True)
    for part in out.stdout.split("pid=")[1:]:
        return int(part.split(",")[0])
    return None


def _pids(state: Path) -> dict[str, int]:
    run = state / "run"
    return {p.stem: json.loads(p.read_text())["pid"] for p in run.glob("*.json")}


def test_a_full_state_disk_is_refused_before_anything_stops(tmp_path: Path, tiny: Path) -> None:
    spec, ports = _spec(tmp_path)
    try:
        assert run_cli("up", "-f", str(spec), env=_env(tmp_path)).returncode == 0
        before = _pids(tiny)
        fill(tiny)
        result = run_cli("restart", "b", "-f", str(spec), "--json", env=_env(tmp_path))
        assert result.returncode == 1, result.stderr
        doc = json.loads(result.stdout)
        assert doc["error_type"] == "HostError", doc
        assert (
            f"local: cannot write {tiny / 'run'} (pid records): its disk is full: "
            in (doc["error"])
        )
        assert "KiB free, under 64 KiB" in doc["error"], doc
        assert "nothing was started or stopped" in doc["error"]
        assert _pids(tiny) == before and _serving(ports["b"]) is not None
    finally:
        (tiny / "filler").unlink(missing_ok=True)
        run_cli("down", "-f", str(spec), env=_env(tmp_path))


def test_a_pid_record_that_cannot_be_written_stops_what_was_started(
    tmp_path: Path, tiny: Path
) -> None:
    """The disk fills while b is being stopped (after the pre-flight): the b launched again
    cannot be recorded, so it is stopped and named, never left serving unrecorded."""
    spec, ports = _spec(tmp_path, slow_b=True)
    try:
        assert run_cli("up", "-f", str(spec), env=_env(tmp_path)).returncode == 0
        before = _pids(tiny)
        proc = servelab_process(tmp_path, "restart", "b", "-f", str(spec), "--json")
        try:
            _wait_for(tmp_path / "term", proc)  # b is being stopped: past the pre-flight
            fill(tiny)
            (tmp_path / "go").write_text("x")
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 1, err
        assert b"Traceback" not in err
        doc = json.loads(out)
        assert doc["down"] == ["b"] and doc["recovery"] == f"servelab up -f {spec}", doc
        said = json.dumps(doc["steps"]) + str(doc["error"])
        assert "its pid record could not be written" in said and "No space left" in said, said
        assert f"(port {ports['b']} on local)" in said and "stopped it" in said, said
        assert _serving(ports["b"]) is None  # nothing left running unrecorded
        assert _serving(ports["a"]) is not None  # a was not in the plan
        assert _pids(tiny)["a"] == before["a"]
    finally:
        (tiny / "filler").unlink(missing_ok=True)
        (tmp_path / "go").write_text("x")
        run_cli("down", "-f", str(spec), env=_env(tmp_path))


@pytest.mark.parametrize(
    ("full_ledger", "unopenable"), [(False, False), (True, False), (True, True)],
    ids=["ledger-elsewhere", "full-ledger", "ledger-cannot-open"],
)  # fmt: skip
def test_down_on_a_full_state_disk_still_stops_everything(
    tmp_path: Path, tiny: Path, full_ledger: bool, unopenable: bool
) -> None:
    """``unopenable`` (the twelfth pass): the ledger's WAL files gone when the disk fills, so
    SQLite cannot even open it ("disk I/O error": no room for the WAL's index); ``down`` stopped
    nothing then. It stops everything, and says the disk is full and the stop not recorded."""
    spec, ports = _spec(tmp_path)
    with ExitStack() as stack:
        size = "1m" if unopenable else "256k"  # room to put the ledger at rest before filling
        led = stack.enter_context(tmpfs(tmp_path / "led", size)) if full_ledger else tmp_path
        env = {"SERVELAB_LEDGER": str(led / "ledger.db")}
        try:
            assert run_cli("up", "-f", str(spec), env=env).returncode == 0
            (tiny / "lock").write_bytes(b"")  # emptied by the last holder, as a lock file is
            if unopenable:  # a ledger at rest: no -wal, no -shm beside it
                conn = sqlite3.connect(led / "ledger.db")
                conn.execute("PRAGMA journal_mode = DELETE")
                conn.close()
                assert not (led / "ledger.db-shm").exists()
            fill(tiny)
            if full_ledger:
                fill(led)
            result = run_cli("down", "-f", str(spec), "--json", env=env)
            assert "Traceback" not in result.stderr and "OSError" not in result.stderr
            assert _serving(ports["a"]) is None and _serving(ports["b"]) is None, result.stderr
            doc = json.loads(result.stdout)
            assert [s["service"] for s in doc["steps"]] == ["b", "a"], doc
            lines = [line for line in result.stderr.splitlines() if "No space left" in line]
            assert any(str(tiny / "lock") in line for line in lines), result.stderr
            if full_ledger:
                assert result.returncode == 1, result.stderr
                assert "error: down: not recorded in the ledger" in result.stderr
                assert doc["ok"] is False and "full" in doc["error"], doc
                assert "not a usable ledger" not in result.stderr
            else:
                assert result.returncode == 0, result.stderr
        finally:
            for place in (tiny, led):
                (place / "filler").unlink(missing_ok=True)
            run_cli("down", "-f", str(spec), env=env)


def test_up_on_a_full_state_disk_is_refused_before_anything_starts(
    tmp_path: Path, tiny: Path
) -> None:
    """``up``'s write pre-flight sees the full disk (the launch-then-record path is the
    restart test's above: there the disk fills after the pre-flight)."""
    spec, ports = _spec(tmp_path)
    (tiny / "logs").mkdir()
    (tiny / "run").mkdir()
    fill(tiny)
    try:
        result = run_cli("up", "-f", str(spec), "--json", env=_env(tmp_path))
        assert result.returncode == 1, result.stderr
        doc = json.loads(result.stdout)
        assert doc["error_type"] == "HostError", doc
        assert (
            f"local: cannot write {tiny / 'run'} (pid records): its disk is full: "
            in (doc["error"])
        )
        assert "nothing was started or stopped" in doc["error"], doc
        assert _serving(ports["a"]) is None and _serving(ports["b"]) is None
    finally:
        (tiny / "filler").unlink(missing_ok=True)
        run_cli("down", "-f", str(spec), env=_env(tmp_path))
