"""A deployment's lock file replaced by a directory or a FIFO (issue 38, the thirteenth pass):
``down`` said "Is a directory" or "Illegal seek" without the path. Now one line names the lock
file and what stands there (exit 1, the lock's errors' exit), nothing is stopped, and a FIFO never
blocks the command: real ``servelab`` processes, each under a timeout."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from servelab.errors import HostError
from servelab.io.lock import LOCK_FILE, TRAFFIC_FILE, hold
from tests.support import free_ports, run_cli
from tests.support.generic import generic_service


def _spec(tmp_path: Path) -> Path:
    (port,) = free_ports(1)
    spec = tmp_path / "servelab.toml"
    spec.write_text('name = "t"\nstate_dir = "state"\n' + generic_service("a", port, ""))
    (tmp_path / "env").mkdir(exist_ok=True)
    return spec


MAKERS: dict[str, Callable[[Path], None]] = {
    "a directory": lambda path: path.mkdir(),
    "a FIFO": lambda path: os.mkfifo(path),
}


@pytest.mark.parametrize("kind", sorted(MAKERS))
@pytest.mark.parametrize("file", [LOCK_FILE, TRAFFIC_FILE])
def test_a_lock_that_is_not_a_file_is_named_and_never_waited_on(
    tmp_path: Path, kind: str, file: str
) -> None:
    spec = _spec(tmp_path)
    (tmp_path / "state").mkdir()
    MAKERS[kind](tmp_path / "state" / file)
    done = run_cli("down", "-f", str(spec), cwd=tmp_path, timeout=60,
                   env={"SERVELAB_LEDGER": str(tmp_path / "ledger.db")})  # fmt: skip
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"{tmp_path / 'state' / file} is {kind}, not a lock file" in lines[0]
    assert "Is a directory" not in done.stderr and "Illegal seek" not in done.stderr


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_hold_refuses_a_directory_or_fifo_naming_it(tmp_path: Path, kind: str) -> None:
    MAKERS[kind](tmp_path / LOCK_FILE)
    with pytest.raises(HostError) as caught, hold(tmp_path, "servelab down", name="t"):
        pytest.fail("held a lock that is not a file")
    assert str(caught.value).startswith(f"the deployment lock {tmp_path / LOCK_FILE} is {kind}")
    with hold(tmp_path / "fresh", "servelab down", name="t") as lock:  # a real file still works
        assert (tmp_path / "fresh" / LOCK_FILE).is_file() and lock.unnamed is None
