"""Pid records can't be lost: real services whose records are deleted are still found (by the
mark servelab puts in their environment), recorded again by ``up`` and stopped by ``down``; a
port held by a process servelab did not launch is named and left alone; a host that does not
answer fails its services' steps instead of reading as "not running"."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import free_port, free_ports
from tests.support.generic import generic_service, servelab_in
from tests.support.processes import http_server, listening, live_procs_under


def _service(name: str, port: int, extra: str = "") -> str:
    """A generic service that is ready once it answers ``/``."""
    return generic_service(name, port, 'ready_path = "/"\n' + extra)


@pytest.fixture
def deployed(tmp_path: Path) -> Iterator[tuple[Path, list[int]]]:
    """``a`` and ``b`` up, then every pid record deleted (a state directory wiped)."""
    ports = free_ports(2)
    (tmp_path / "servelab.toml").write_text(
        'name = "t"\nstate_dir = "state"\n'
        + _service("a", ports[0])
        + _service("b", ports[1], 'depends_on = ["a"]\n')
    )
    try:
        assert servelab_in(tmp_path, "up")[0] == 0
        for record in (tmp_path / "state" / "run").glob("*.json"):
            record.unlink()
        yield tmp_path, ports
    finally:
        servelab_in(tmp_path, "down")
    assert live_procs_under(tmp_path) == []


def test_status_and_down_find_what_servelab_launched_without_its_records(
    deployed: tuple[Path, list[int]],
) -> None:
    root, ports = deployed
    code, out, _ = servelab_in(root, "status", "--json")
    assert code == 0
    assert {s["service"]: s["unrecorded"] for s in json.loads(out)} == {"a": True, "b": True}
    code, out, err = servelab_in(root, "down", "--json")
    assert code == 0, err
    steps = {s["service"]: s for s in json.loads(out)["steps"]}
    assert steps["a"]["outcome"] == steps["b"]["outcome"] == "stopped"
    assert steps["a"]["evidence"]["unrecorded"]["outcome"] == "stopped"
    assert not any(listening(port) for port in ports)
    assert live_procs_under(root) == []


def test_up_records_again_what_servelab_launched(deployed: tuple[Path, list[int]]) -> None:
    root, ports = deployed
    code, _, err = servelab_in(root, "up")
    assert code == 0, err
    assert "a: already up (pid " in err and "its lost pid record written again" in err
    assert (root / "state" / "run" / "a.json").exists()
    code, out, _ = servelab_in(root, "status", "--json")
    shown = json.loads(out)
    assert code == 0 and not any(s["unrecorded"] for s in shown)
    assert {s["pid_source"] for s in shown} == {"port owner in the recorded process group"}
    assert servelab_in(root, "down")[0] == 0
    assert not any(listening(port) for port in ports)


def test_a_port_servelab_did_not_launch_is_named_and_left_alone(tmp_path: Path) -> None:
    with http_server({}, cwd=tmp_path) as (port, stranger):
        (tmp_path / "servelab.toml").write_text('name = "t"\nstate_dir = "state"\n'
                                                + _service("a", port))  # fmt: skip
        code, out, _ = servelab_in(tmp_path, "down", "--json")
        assert code == 0
        (step,) = json.loads(out)["steps"]
        assert step["outcome"] == "not running"
        name = Path(f"/proc/{stranger.pid}/comm").read_text().strip()
        owner = {"pid": stranger.pid, "launched_by_servelab": False, "name": name}
        assert step["evidence"]["port_owner"] == owner
        assert stranger.poll() is None and listening(port)
        code, out, _ = servelab_in(
            tmp_path, "down"
        )  # a low of issue 38's later pass: named in words
        assert code == 0 and stranger.poll() is None
        said = " ".join(out.split())
        assert f"held by pid {stranger.pid} ({name})" in said, out
        code, out, _ = servelab_in(tmp_path, "status")
        assert f"{stranger.pid} (port owner)" in out


def test_a_host_that_does_not_answer_fails_its_steps_and_the_others_still_show(
    tmp_path: Path,
) -> None:
    local = free_port()
    (tmp_path / "servelab.toml").write_text(
        'name = "t"\nstate_dir = "state"\n'
        f'[hosts.far]\nssh = "root@127.0.0.1"\nport = {free_port()}\nconnect_timeout_s = 2\n'
        + _service("a", local)
        + f'[services.b]\nrole = "generic"\nurl = "http://127.0.0.1:{free_port()}"\n'
        'host = "far"\nstart = "true"\n'
    )
    try:
        assert servelab_in(tmp_path, "up", "a")[0] == 0
        code, out, _ = servelab_in(tmp_path, "status")
        assert code == 1
        flat = " ".join(out.split())
        assert "HTTP 200" in flat and "host did not answer: far: cannot connect" in flat
        code, out, err = servelab_in(tmp_path, "down", "--json")
        assert code == 1, err
        steps = {s["service"]: s for s in json.loads(out)["steps"]}
        assert steps["b"]["outcome"] == "failed" and "far" in steps["b"]["evidence"]["error"]
        assert steps["a"]["outcome"] == "stopped" and not listening(local)
    finally:
        servelab_in(tmp_path, "down", "a")
    assert live_procs_under(tmp_path) == []
