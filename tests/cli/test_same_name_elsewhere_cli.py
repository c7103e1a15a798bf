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
from tests.support.specs import PdEnv, PdPorts, pd_spec_toml


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


@pytest.fixture
def linked_logs(tmp_path: Path) -> Iterator[tuple[Path, Path, PdPorts]]:
    """One simulated PD spec copied to ``h1`` and ``h2``, each with its own state folder whose
    ``logs`` is a link to one shared folder."""
    ports = PdPorts.free(proxy=False)
    shared = tmp_path / "shared"
    shared.mkdir()
    h1, h2 = tmp_path / "h1", tmp_path / "h2"
    for root in (h1, h2):
        (root / "state").mkdir(parents=True)
        (root / "state" / "logs").symlink_to(shared)
        PdEnv().write(root / "env")
        (root / "servelab.toml").write_text(pd_spec_toml(ports))
    try:
        yield h1, h2, ports
    finally:
        servelab_in(h2, "down")
        servelab_in(h1, "down")
    assert live_procs_under(tmp_path) == []


@pytest.mark.timeout(300)
def test_a_log_shared_through_a_link_proves_no_router_its_own(
    linked_logs: tuple[Path, Path, PdPorts],
) -> None:
    """The eighteenth pass, H1: the real router writes its title over its environment (no mark),
    so a process writing to the service's log was this deployment's; ``h2``'s ``down`` stopped
    ``h1``'s router through a ``logs`` folder both link to. A log reached through a link under
    the state folder proves nothing."""
    h1, h2, ports = linked_logs
    code, _, err = servelab_in(h1, "up")
    assert code == 0, err
    router = json.loads((h1 / "state" / "run" / "router.json").read_text())["pid"]
    servelab_in(h2, "down", "--json")
    assert alive(router) and listening(ports.router)
    code, _, err = servelab_in(h1, "down", "--json")  # its own: by its pid record
    assert code == 0, err
    assert not alive(router) and not listening(ports.router)


def test_a_deployment_whose_folder_was_moved_is_still_itself(tmp_path: Path) -> None:
    """The eighteenth pass, H2/M2: the place was a digest of the state folder's path, so after
    ``mv g g2`` the deployment's own processes were another's (``down`` left them, exit 1) and
    its answer references were lost. The place is the folder's id and moves with it."""
    (port,) = free_ports(1)
    first = tmp_path / "g"
    first.mkdir()
    (first / "servelab.toml").write_text(generic_service("a", port, 'ready_path = "/"\n'))
    moved = tmp_path / "g2"
    try:
        code, _, err = servelab_in(first, "up")
        assert code == 0, err
        assert (first / ".servelab" / "id").is_file()
        first.rename(moved)
        _, out, err = servelab_in(moved, "status", "--json")  # its http.server's folder moved
        (row,) = json.loads(out)
        assert row["alive"] and row.get("other_deployment") is None, out + err
        assert "another" not in row["pid_source"], row
        pid = row["pid"]
        code, out, err = servelab_in(moved, "down", "--json")
        assert code == 0, out + err
        assert json.loads(out)["steps"][0]["outcome"] == "stopped", out
        assert not alive(pid) and not listening(port)
    finally:
        for root in (first, moved):
            if root.exists():
                servelab_in(root, "down")
    assert live_procs_under(tmp_path) == []
