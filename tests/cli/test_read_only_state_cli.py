"""``down`` on a read-only state folder (a real read-only bind mount, as root): every process is
stopped, its row says "stopped" with a warning that its pid record could not be removed, and the
exit code is 0 (the deployment is down); the records stay, stale, and a later ``down``,
``status`` and ``up`` read them as not running. Real processes, the real router."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.generic import servelab_in
from tests.support.processes import alive, live_procs_under
from tests.support.specs import write_pd_spec
from tests.support.tmpfs import read_only

_SERVICES = ("prefill", "decode", "router")


def _pids(state: Path) -> dict[str, int]:
    return {s: int(json.loads((state / "run" / f"{s}.json").read_text())["pid"]) for s in _SERVICES}


@pytest.fixture
def up(tmp_path: Path) -> Iterator[tuple[Path, dict[str, int]]]:
    write_pd_spec(tmp_path)
    code, _, err = servelab_in(tmp_path, "up")
    assert code == 0, err
    try:
        yield tmp_path, _pids(tmp_path / "state")
    finally:
        servelab_in(tmp_path, "down")
    assert live_procs_under(tmp_path) == []


@pytest.mark.timeout(600)
def test_down_on_a_read_only_state_folder(up: tuple[Path, dict[str, int]]) -> None:
    root, pids = up
    state = root / "state"
    with read_only(state):
        code, out, err = servelab_in(root, "down")
        assert not any(alive(pid) for pid in pids.values()), out + err
        assert code == 0, out + err
        assert "down: ok" in out, out
        assert "failed" not in out + err, out + err
        assert out.count("│ stopped ") == 3, out
        assert out.count("WARNING: its pid record could not be removed") == 3, out
        assert _pids(state) == pids  # the records stay, stale
        code, out, err = servelab_in(
            root, "down", "--json"
        )  # again: the stale records, not running
        assert code == 0, out + err
        steps = json.loads(out)["steps"]
        assert [s["outcome"] for s in steps] == ["not running"] * 3, steps
        for step in steps:
            assert "Read-only file system" in step["evidence"]["stale_record"], step
        code, out, err = servelab_in(root, "status", "--json")
        assert [row["alive"] for row in json.loads(out)] == [False] * 3, out + err
    code, out, err = servelab_in(root, "up")  # writable again: the stale records give way
    assert code == 0, out + err
    assert all(alive(pid) for pid in _pids(state).values())
    assert not set(_pids(state).values()) & set(pids.values())
