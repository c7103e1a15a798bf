"""``servelab restart`` where it cannot write (issue 38, the ninth pass), as real processes.

Before anything stops, every place the restart writes is proved writable: an immutable
``state/run`` (pid records) or log file is refused, naming it, and nothing is stopped. When
``state/run`` is made immutable while a service stops, the stopped service's record stays, stale
(a warning), and the restart goes on until a start cannot write its record: that service is
stopped again and the failed restart's report names every service down and the command that
brings them back (under ``--json`` too); that command does bring them back. Needs ``chattr``
(root, a file system with inode flags)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import free_ports, run_cli
from tests.support.generic import generic_service, servelab_process

#: A service that, on SIGTERM, writes ``term`` beside it and exits only once ``go`` exists
#: (bounded: 60 s), so a test can act while it is being stopped.
SLOW_STOP = """\
import http.server, pathlib, signal, sys, time
here = pathlib.Path(sys.argv[2])
def term(*_):
    (here / "term").write_text("x")
    deadline = time.monotonic() + 60
    while not (here / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
handler = http.server.SimpleHTTPRequestHandler
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), handler).serve_forever()
"""


def _chattr(flag: str, path: Path) -> None:
    subprocess.run(["chattr", flag, str(path)], check=True, capture_output=True)


@pytest.fixture
def immutable() -> Iterator[list[Path]]:
    """Paths a test makes immutable (``chattr +i``), made mutable again whatever happens."""
    if shutil.which("chattr") is None:
        pytest.skip("no chattr")
    made: list[Path] = []
    yield made
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], check=False, capture_output=True)


def _freeze(immutable: list[Path], path: Path) -> None:
    try:
        _chattr("+i", path)
    except subprocess.CalledProcessError:
        pytest.skip("chattr +i is not supported here")
    immutable.append(path)


def _spec(tmp_path: Path, slow_b: bool = False) -> Path:
    a, b = free_ports(2)
    (tmp_path / "slow.py").write_text(SLOW_STOP)
    b_table = generic_service("b", b, 'ready_path = "/"\ndepends_on = ["a"]\n')
    if slow_b:
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
    return spec


def _env(tmp_path: Path) -> dict[str, str]:
    return {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}


def _pids(tmp_path: Path) -> dict[str, int]:
    run = tmp_path / "state" / "run"
    return {name: json.loads((run / f"{name}.json").read_text())["pid"] for name in ("a", "b")}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _ready(spec: Path, tmp_path: Path) -> bool:
    return run_cli("status", "-f", str(spec), env=_env(tmp_path)).returncode == 0


@pytest.mark.parametrize(
    ("frozen", "named"),
    [("state/run", "state/run (pid records)"), ("state/logs/b.log", "b.log (b's log)")],
)
def test_an_unwritable_place_is_refused_before_anything_stops(
    frozen: str, named: str, tmp_path: Path, immutable: list[Path]
) -> None:
    spec = _spec(tmp_path)
    try:
        assert run_cli("up", "-f", str(spec), env=_env(tmp_path)).returncode == 0
        before = _pids(tmp_path)
        _freeze(immutable, tmp_path / frozen)
        result = run_cli("restart", "a", "-f", str(spec), "--json", env=_env(tmp_path))
        assert result.returncode == 1, result.stderr
        doc = json.loads(result.stdout)
        assert doc["error_type"] == "HostError" and named in doc["error"], doc
        assert "nothing was started or stopped" in doc["error"]
        assert _pids(tmp_path) == before and all(map(_alive, before.values()))  # none stopped
    finally:
        for path in immutable:
            _chattr("-i", path)
        run_cli("down", "-f", str(spec), env=_env(tmp_path))


def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        assert time.monotonic() < deadline and proc.poll() is None, "never got there"
        time.sleep(0.02)


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_a_write_that_fails_after_a_stop_says_what_is_down_and_how_back(
    as_json: bool, tmp_path: Path, immutable: list[Path]
) -> None:
    spec = _spec(tmp_path, slow_b=True)
    try:
        assert run_cli("up", "-f", str(spec), env=_env(tmp_path)).returncode == 0
        flag = ("--json",) if as_json else ()
        proc = servelab_process(tmp_path, "restart", "a", "-f", str(spec), *flag)
        try:
            _wait_for(tmp_path / "term", proc)  # b is being stopped: its record goes next
            _freeze(immutable, tmp_path / "state" / "run")
            (tmp_path / "go").write_text("x")
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 1, err
        # b's stopped processes' record stays, stale (a warning); a, stopped too, started but its
        # record could not be written, so it was stopped again: both are down, and named so
        line = f"down: a, b; bring them back with: servelab up -f {spec}"
        stderr = err.decode()
        assert "Traceback" not in stderr, stderr
        if as_json:
            doc = json.loads(out)
            assert (doc["ok"], doc["down"]) == (False, ["a", "b"]), doc
            assert doc["recovery"] == f"servelab up -f {spec}", doc
            (step,) = doc["steps"]
            assert (step["service"], step["outcome"]) == ("a", "failed"), step
            assert "state/run/a.json" in json.dumps(step), step
        else:
            assert "b: stopped; WARNING: its pid record could not be removed" in stderr, stderr
            assert "state/run/b.json): it stays, stale" in stderr, stderr
            assert "a: failed: a: started as pid" in stderr, stderr
            assert "state/run/a.json" in stderr and "(Operation not permitted)" in stderr, stderr
            words = " ".join(out.decode().split())  # the report wraps at the terminal width
            assert line in words and "restart: FAILED" in words, out.decode()
        for path in immutable:
            _chattr("-i", path)
        immutable.clear()
        back = run_cli("up", "-f", str(spec), env=_env(tmp_path))  # the command it named
        assert back.returncode == 0, back.stderr
        assert _ready(spec, tmp_path)
    finally:
        for path in immutable:
            _chattr("-i", path)
        immutable.clear()
        (tmp_path / "go").write_text("x")
        run_cli("down", "-f", str(spec), env=_env(tmp_path))
