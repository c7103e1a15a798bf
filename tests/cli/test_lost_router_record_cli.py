"""The real sglang-router writes its process title (``sglang::router``) over its argv and
environment, so the mark servelab launched it with is gone from ``/proc/PID/environ``. With its
pid record lost, it is still known as this deployment's by its stdout/stderr being the service's
log file: ``status`` shows it as servelab's, ``up`` records it again, ``down`` stops it, locally
and over a real sshd. A port owner that cannot be told (its log file deleted) is not stopped and
``down`` fails, naming it and how to stop it. A log file that is a link to /dev/null proves
nothing. Real processes."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.generic import generic_service, servelab_in
from tests.support.processes import alive, http_server, listening, live_procs_under
from tests.support.specs import PdEnv, PdPorts, pd_spec_toml
from tests.support.sshd import SshdServer

_SERVICES = ("prefill", "decode", "router")


def _router_pid(state: Path) -> int:
    record = json.loads((state / "run" / "router.json").read_text())
    pid = int(record["pid"])
    assert Path(f"/proc/{pid}/comm").read_text().strip() == "sglang::router"
    assert b"SERVELAB_SERVICE" not in Path(f"/proc/{pid}/environ").read_bytes()  # written over
    return pid


def _up_then_lose_records(root: Path, state: Path, spec: str) -> int:
    """Write ``spec`` and its env files, ``up``, then lose the pid records; the router's pid."""
    PdEnv().write(root / "env")
    (root / "servelab.toml").write_text(spec)
    code, _, err = servelab_in(root, "up")
    assert code == 0, err
    pid = _router_pid(state)
    shutil.move(state / "run", root / "run-aside")  # the records lost
    return pid


def _ports(ports: PdPorts) -> list[int]:
    return [ports.prefill, ports.decode, ports.router]


@pytest.fixture
def lost(tmp_path: Path) -> Iterator[tuple[Path, PdPorts, int]]:
    """A simulated PD pair and the real router up, then the state folder's records lost."""
    ports = PdPorts.free(proxy=False)
    pid = _up_then_lose_records(tmp_path, tmp_path / "state", pd_spec_toml(ports))
    try:
        yield tmp_path, ports, pid
    finally:
        servelab_in(tmp_path, "down")
        if alive(pid):
            os.killpg(pid, signal.SIGTERM)  # this test started it (the unproven case)
    assert live_procs_under(tmp_path) == []


def test_status_and_down_know_the_router_by_its_log(lost: tuple[Path, PdPorts, int]) -> None:
    root, ports, pid = lost
    code, out, _ = servelab_in(root, "status", "--json")
    shown = {s["service"]: s for s in json.loads(out)}
    assert code == 0 and shown["router"]["pid"] == pid and shown["router"]["unrecorded"]
    code, out, err = servelab_in(root, "down", "--json")
    assert code == 0, out + err
    steps = {s["service"]: s for s in json.loads(out)["steps"]}
    assert {steps[name]["outcome"] for name in _SERVICES} == {"stopped"}
    assert steps["router"]["evidence"]["unrecorded"]["pid"] == pid
    assert "port_owner" not in steps["router"]["evidence"]
    assert not any(listening(port) for port in _ports(ports))


def test_up_records_the_router_again(lost: tuple[Path, PdPorts, int]) -> None:
    root, ports, pid = lost
    code, _, err = servelab_in(root, "up")
    assert code == 0, err
    assert f"router: already up (pid {pid}" in err and "its lost pid record written again" in err
    assert json.loads((root / "state" / "run" / "router.json").read_text())["pid"] == pid
    assert servelab_in(root, "down")[0] == 0
    assert not any(listening(port) for port in _ports(ports))


def test_a_router_that_cannot_be_told_fails_down_and_is_named(
    lost: tuple[Path, PdPorts, int],
) -> None:
    root, ports, pid = lost
    (root / "state" / "logs" / "router.log").unlink()  # its output no longer proves it ours
    code, out, _ = servelab_in(root, "down", "--json")
    assert code == 1
    steps = {s["service"]: s for s in json.loads(out)["steps"]}
    assert steps["router"]["outcome"] == "failed"
    unproven = {"pid": pid, "port": ports.router, "host": "local", "name": "sglang::router"}
    assert steps["router"]["evidence"]["unproven_owner"] == unproven
    assert listening(ports.router) and alive(pid)  # not stopped
    code, out, _ = servelab_in(root, "down")
    said = " ".join(out.replace("│", " ").split())
    assert code == 1 and "down: FAILED" in said
    assert f"port {ports.router} on local is held by pid {pid} (sglang::router)" in said, out
    assert f"`kill -TERM {pid}`" in said, out
    shutil.move(root / "run-aside", root / "state" / "run")  # its record found again: stopped
    code, out, _ = servelab_in(root, "down", "--json")
    assert code == 0 and json.loads(out)["steps"][0]["outcome"] == "stopped"
    assert not listening(ports.router) and not alive(pid)


def test_a_log_that_links_to_dev_null_proves_nothing(tmp_path: Path) -> None:
    """A stranger writing to /dev/null on the port is not adopted through a log linked there."""
    with http_server({}, cwd=tmp_path) as (port, stranger):
        (tmp_path / "servelab.toml").write_text(
            'name = "t"\nstate_dir = "state"\n' + generic_service("a", port, 'ready_path = "/"\n')
        )
        (tmp_path / "state" / "logs").mkdir(parents=True)
        (tmp_path / "state" / "logs" / "a.log").symlink_to("/dev/null")
        code, out, _ = servelab_in(tmp_path, "down", "--json")
        assert code == 0
        (step,) = json.loads(out)["steps"]
        assert step["outcome"] == "not running" and step["evidence"]["port_owner"]["pid"]
        assert stranger.poll() is None and listening(port)


@pytest.mark.timeout(300)
def test_over_ssh_down_knows_the_router_by_its_log(tmp_path: Path, sshd: SshdServer) -> None:
    state = tmp_path / "rstate"  # absolute: the remote host's state folder is this one
    ports = PdPorts.free(proxy=False)
    remote = sshd.host_toml("remote")
    text = pd_spec_toml(ports, state_dir=str(state), host="remote", hosts_toml=remote)
    pid = _up_then_lose_records(tmp_path, state, text)
    try:
        code, out, err = servelab_in(tmp_path, "down", "--json")
        assert code == 0, out + err
        steps = {s["service"]: s for s in json.loads(out)["steps"]}
        assert steps["router"]["outcome"] == "stopped"
        assert steps["router"]["evidence"]["unrecorded"]["pid"] == pid
        assert not any(listening(port) for port in _ports(ports))
    finally:
        servelab_in(tmp_path, "down")
        if alive(pid):
            os.killpg(pid, signal.SIGTERM)
