"""``servelab up`` and ``servelab restart --rolling`` where they cannot write (issue 38, the tenth
pass), as real processes: before anything starts, stops or leaves the router, every place the
command writes is proved writable, as plain ``restart`` does (``ops/deploy/writable.py``). An
immutable ``state/run`` (pid records: ``chattr +i``, skipped where the file system has no inode
flags) or a read-only ``state/logs`` (a read-only tmpfs mounted over it: ``chmod 0555`` would not
stop root) is refused naming it, exit 1, and nothing was started or stopped."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import free_ports, run_cli
from tests.support.generic import generic_service
from tests.support.xpyd import write_2p2d_spec

PREFLIGHT = "(pre-flight: nothing was started or stopped)"


class _Frozen:
    """Places a test makes unwritable, made writable again whatever happens."""

    def __init__(self) -> None:
        self.immutable: list[Path] = []
        self.mounted: list[Path] = []

    def freeze(self, how: str, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        if how == "chattr":
            if shutil.which("chattr") is None:
                pytest.skip("no chattr")
            done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
            if done.returncode != 0:
                pytest.skip(f"chattr +i is not supported here: {done.stderr.decode().strip()}")
            self.immutable.append(path)
            return
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro", "tmpfs", str(path)],
                              capture_output=True)  # fmt: skip
        if done.returncode != 0:
            pytest.skip(f"cannot mount a read-only tmpfs here: {done.stderr.decode().strip()}")
        self.mounted.append(path)

    def thaw(self) -> None:
        for path in self.immutable:
            subprocess.run(["chattr", "-i", str(path)], capture_output=True)
        for path in self.mounted:
            subprocess.run(["umount", str(path)], capture_output=True)
        self.immutable.clear()
        self.mounted.clear()


@pytest.fixture
def frozen() -> Iterator[_Frozen]:
    made = _Frozen()
    try:
        yield made
    finally:
        made.thaw()


#: (how the place is made unwritable, the place under the state dir, how the error names it)
PLACES = [
    ("chattr", "run", "state/run (pid records)"),
    ("ro-tmpfs", "logs", "state/logs (a's log)"),
]


@pytest.mark.parametrize(("how", "place", "named"), PLACES, ids=["chattr-run", "ro-logs"])
def test_up_refuses_an_unwritable_place_before_it_starts_anything(
    how: str, place: str, named: str, tmp_path: Path, frozen: _Frozen
) -> None:
    a, b = free_ports(2)
    spec = tmp_path / "servelab.toml"
    services = generic_service("a", a, 'ready_path = "/"\n') + generic_service(
        "b", b, 'ready_path = "/"\ndepends_on = ["a"]\n'
    )
    spec.write_text('name = "t"\nstate_dir = "state"\n' + services)
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    frozen.freeze(how, tmp_path / "state" / place)
    try:
        done = run_cli("up", "-f", str(spec), "--json", env=env)
        assert done.returncode == 1, done.stdout + done.stderr
        doc = json.loads(done.stdout)
        assert doc["error_type"] == "HostError" and named in doc["error"], doc
        assert PREFLIGHT in doc["error"]
        assert not (tmp_path / "state" / "run" / "a.json").exists()  # nothing was started
        assert run_cli("status", "-f", str(spec), env=env).returncode != 0  # none answers
        frozen.thaw()
        again = run_cli("up", "-f", str(spec), env=env)  # writable again: it starts
        assert again.returncode == 0, again.stderr
    finally:
        frozen.thaw()
        run_cli("down", "-f", str(spec), env=env)


def _pids(state: Path) -> dict[str, int]:
    run = state / "run"
    return {p.stem: json.loads(p.read_text())["pid"] for p in sorted(run.glob("*.json"))}


@pytest.mark.timeout(400)
def test_a_rolling_restart_refuses_an_unwritable_place_before_it_takes_a_worker_out(
    tmp_path: Path, frozen: _Frozen
) -> None:
    """On a 2P2D stack (a roll needs two workers of a role), each way in turn."""
    spec, _ports = write_2p2d_spec(tmp_path)
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    try:
        assert run_cli("up", "-f", str(spec), env=env, timeout=200).returncode == 0
        before = _pids(tmp_path / "state")
        for how, place, named in [
            ("chattr", "run", "state/run (pid records)"),
            ("ro-tmpfs", "logs", "decode-1's log"),
        ]:
            frozen.freeze(how, tmp_path / "state" / place)
            done = run_cli("restart", "--rolling", "decode", "-f", str(spec), "--json", env=env)
            assert done.returncode == 1, done.stdout + done.stderr
            doc = json.loads(done.stdout)
            assert doc["error_type"] == "HostError" and named in doc["error"], doc
            assert PREFLIGHT in doc["error"]
            frozen.thaw()
            assert _pids(tmp_path / "state") == before  # none stopped or started again
            status = run_cli("status", "-f", str(spec), "--json", env=env)
            assert status.returncode == 0, status.stdout + status.stderr
            rows = {row["service"]: row for row in json.loads(status.stdout)}
            listed = [rows[w]["in_router"] for w in ("decode-1", "decode-2")]
            assert listed == [True, True], rows  # never taken out of the router
    finally:
        frozen.thaw()
        run_cli("down", "-f", str(spec), env=env)
