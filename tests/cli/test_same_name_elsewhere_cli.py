"""Two copies of one spec (one name, here the default ``servelab``) in two folders, each with its
own state folder, and the second's service on the first's port: the first's process carries a
mark with the second's name, service and address, but not its state folder (the seventeenth
pass, H1: the second's ``up`` said "already up (started by servelab)", wrote the first's process
into its own pid record, and its ``down`` stopped it). Real processes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import free_ports
from tests.support.generic import generic_service, servelab_in
from tests.support.processes import alive, listening, live_procs_under


@pytest.fixture
def copies(tmp_path: Path) -> Iterator[tuple[Path, Path, int]]:
    """``one/servelab.toml`` and ``two/servelab.toml``: one spec, one port, two state folders."""
    (port,) = free_ports(1)
    one, two = tmp_path / "one", tmp_path / "two"
    for root in (one, two):
        root.mkdir()
        (root / "servelab.toml").write_text(generic_service("a", port, 'ready_path = "/"\n'))
    try:
        yield one, two, port
    finally:
        servelab_in(two, "down")
        servelab_in(one, "down")
    assert live_procs_under(tmp_path) == []


def test_a_copy_with_its_own_state_folder_never_adopts_or_stops_the_first(
    copies: tuple[Path, Path, int],
) -> None:
    one, two, port = copies
    code, _, err = servelab_in(one, "up")
    assert code == 0, err
    pid = json.loads((one / ".servelab" / "run" / "a.json").read_text())["pid"]
    code, out, err = servelab_in(two, "up", "--json")
    assert code == 1, err
    assert "already up" not in err + out
    assert "held by pid" in err and f"a@local:{port} of deployment servelab: this" in err, err
    assert not (two / ".servelab" / "run" / "a.json").exists()  # not written as its own
    code, out, err = servelab_in(two, "down", "--json")
    assert alive(pid) and listening(port), (code, out, err)
    (step,) = json.loads(out)["steps"]
    assert step["outcome"] != "stopped", step
    code, out, err = servelab_in(one, "down", "--json")
    assert code == 0, err
    assert json.loads(out)["steps"][0]["outcome"] == "stopped"
    assert not alive(pid) and not listening(port)
