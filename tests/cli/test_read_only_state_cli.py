"""``down`` on a read-only state folder (a real read-only bind mount, as root): every process is
stopped, its row says "stopped" with a warning that its pid record could not be removed, and the
exit code is 0 (the deployment is down); the records stay, stale, and a later ``down``,
``status`` and ``up`` read them as not running. Real processes, the real router."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import run_cli
from tests.support.processes import live_procs_under
from tests.support.specs import write_pd_spec
from tests.support.tmpfs import read_only

_SERVICES = ("prefill", "decode", "router")


def _cli(root: Path, *args: str) -> tuple[int, str, str]:
    done = run_cli(*args, cwd=root, env={"SERVELAB_LEDGER": str(root / "ledger.db")})
    return done.returncode, done.stdout, done.stderr


def _pids(state: Path) -> dict[str, int]:
    return {s: int(json.loads((state / "run" / f"{s}.json").read_text())["pid"]) for s in _SERVICES}


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


@pytest.fixture
def up(tmp_path: Path) -> Iterator[tuple[Path, dict[str, int]]]:
    write_pd_spec(tmp_path)
    code, _, err = _cli(tmp_path, "up")
    assert code == 0, err
    try:
        yield tmp_path, _pids(tmp_path / "state")
    finally:
        _cli(tmp_path, "down")
    assert live_procs_under(tmp_path) == []


@pytest.mark.timeout(600)
def test_down_on_a_read_only_state_folder(up: tuple[Path, dict[str, int]]) -> None:
    root, pids = up
    state = root / "state"
    with read_only(state):
        code, out, err = _cli(root, "down")
        assert not any(_alive(pid) for pid in pids.values()), out + err
        assert code == 0, out + err
        assert "down: ok" in out, out
        assert "failed" not in out + err, out + err
        assert out.count("│ stopped ") == 3, out
        assert out.count("WARNING: its pid record could not be removed") == 3, out
        assert _pids(state) == pids  # the records stay, stale
        code, out, err = _cli(root, "down", "--json")  # again: the stale records, not running
        assert code == 0, out + err
        steps = json.loads(out)["steps"]
        assert [s["outcome"] for s in steps] == ["not running"] * 3, steps
        for step in steps:
            assert "Read-only file system" in step["evidence"]["stale_record"], step
        code, out, err = _cli(root, "status", "--json")
        assert [row["alive"] for row in json.loads(out)] == [False] * 3, out + err
    code, out, err = _cli(root, "up")  # writable again: the stale records give way
    assert code == 0, out + err
    assert all(_alive(pid) for pid in _pids(state).values())
    assert not set(_pids(state).values()) & set(pids.values())
