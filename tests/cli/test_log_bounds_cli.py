"""``up``, ``restart`` and ``status`` with a hostile log or pid record (issue 38, the seventeenth
hostile pass), as real processes, locally and over the loopback sshd: a 2 GB log of a service
whose start command fails took ``up`` to 2.16 GB of memory (the log read whole for its last
lines); a log linked to ``/dev/full`` was written into, then read until servelab was OOM-killed,
the deployment left down; a 500 MB pid record took ``status`` to 1 GB. Now the tail is read from
the log's end, a log that is a device or a FIFO is refused in the pre-flight (nothing stopped,
the file named, the link untouched), and a pid record over 64 KiB is unreadable. Memory is the
servelab process's own peak (``VmHWM``, :mod:`tests.support.peakrss`)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from servelab.io.hosts.logs import LOG_REFUSED
from tests.support import free_port
from tests.support.generic import generic_service, servelab_in
from tests.support.peakrss import run_measured
from tests.support.processes import alive, listening, live_procs_under
from tests.support.sshd import SshdServer
from tests.support.tmpfs import tmpfs

#: A generous bound on the peak memory of one servelab command (about 60 MB when bounded).
BOUND_MB = 300


def _spec(tmp_path: Path, service: str, server: SshdServer | None = None) -> Path:
    """A one-service spec (``service``: its table) whose state folder is ``tmp_path/state``;
    with ``server``, the service runs on the sshd's host (this machine, the same folder)."""
    hosts = ""
    if server is not None:
        hosts = server.host_toml("remote")
        service = service.replace('role = "generic"\n', 'role = "generic"\nhost = "remote"\n')
    spec = tmp_path / "servelab.toml"
    state = tmp_path / "state"
    spec.write_text(f'name = "g"\nstate_dir = "{state}"\n{hosts}{service}')
    (state / "logs").mkdir(parents=True, exist_ok=True)
    (state / "run").mkdir(exist_ok=True)
    return spec


def _server(where: str, request: pytest.FixtureRequest) -> SshdServer | None:
    return request.getfixturevalue("sshd") if where == "ssh" else None


def _failing(port: int) -> str:
    return (
        f'[services.web]\nrole = "generic"\nurl = "http://127.0.0.1:{port}"\n'
        "start = 'echo boom; exit 3'\n"
    )


@pytest.mark.timeout(300)
@pytest.mark.parametrize("where", ["local", "ssh"])
def test_up_quotes_a_2_gb_log_from_its_end(
    tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    spec = _spec(tmp_path, _failing(free_port()), _server(where, request))
    log = tmp_path / "state" / "logs" / "web.log"
    with log.open("wb") as out:
        out.truncate(2 << 30)
    done, peak_mb = run_measured(["up", "-f", str(spec)], tmp_path / "up.rss", timeout=240)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the start command exited with status 3" in done.stderr
    assert done.stderr.rstrip().endswith("\n  boom"), done.stderr
    assert peak_mb < BOUND_MB, peak_mb


@pytest.mark.timeout(300)
@pytest.mark.parametrize("where", ["local", "ssh"])
@pytest.mark.parametrize("kind", ["/dev/full", "fifo", "a file elsewhere", "nothing"])
def test_up_refuses_a_log_that_is_a_device_a_fifo_or_a_link(
    tmp_path: Path, where: str, kind: str, request: pytest.FixtureRequest
) -> None:
    """A log linked to a file elsewhere (someone's ``~/.bashrc``) or to nothing would have the
    launch append the service's output there: refused as a device is (issue 38, the seventeenth
    pass's left)."""
    spec = _spec(tmp_path, _failing(free_port()), _server(where, request))
    log = tmp_path / "state" / "logs" / "web.log"
    victim = tmp_path / "victim.txt"
    if kind == "fifo":
        os.mkfifo(log)
    elif kind == "a file elsewhere":
        victim.write_text("keep me\n")
        kind = str(victim)
        log.symlink_to(kind)
    elif kind == "nothing":
        kind = str(victim)
        log.symlink_to(kind)
    else:
        log.symlink_to(kind)
    done, peak_mb = run_measured(["up", "-f", str(spec)], tmp_path / "up.rss", timeout=240)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"cannot write {log} (web's log): {LOG_REFUSED}" in done.stderr, done.stderr
    assert "(pre-flight: nothing was started or stopped)" in done.stderr
    assert "started pid" not in done.stdout + done.stderr
    assert not (tmp_path / "state" / "run" / "web.json").exists()
    assert os.readlink(log) == kind if kind != "fifo" else log.is_fifo()
    assert not victim.exists() or victim.read_text() == "keep me\n"
    assert peak_mb < BOUND_MB, peak_mb


@pytest.mark.timeout(300)
def test_restart_with_its_log_linked_to_dev_full_stops_nothing(tmp_path: Path) -> None:
    """The pass's ``restart decode`` with ``logs/decode.log -> /dev/full`` left it down, OOM."""
    port = free_port()
    spec = _spec(tmp_path, generic_service("web", port, 'ready_path = "/"\n'))
    record = tmp_path / "state" / "run" / "web.json"
    log = tmp_path / "state" / "logs" / "web.log"
    try:
        code, out, err = servelab_in(tmp_path, "up", "-f", str(spec))
        assert code == 0, out + err
        before = record.read_text()
        pid = json.loads(before)["pid"]
        log.unlink()
        log.symlink_to("/dev/full")
        done, peak_mb = run_measured(["restart", "-f", str(spec), "web"], tmp_path / "r.rss")
        assert done.returncode == 1, done.stdout + done.stderr
        assert f"cannot write {log} (web's log): {LOG_REFUSED}" in done.stderr, done.stderr
        assert alive(pid) and listening(port) and record.read_text() == before
        assert peak_mb < BOUND_MB, peak_mb
    finally:
        if log.is_symlink():
            log.unlink()
        servelab_in(tmp_path, "down", "-f", str(spec))
        for left in live_procs_under(tmp_path):
            os.kill(left, signal.SIGKILL)


def test_status_reads_no_500_mb_pid_record(tmp_path: Path) -> None:
    spec = _spec(tmp_path, _failing(free_port()))
    with (tmp_path / "state" / "run" / "web.json").open("wb") as out:
        out.truncate(500 << 20)
    done, peak_mb = run_measured(["status", "-f", str(spec)], tmp_path / "status.rss")
    assert "Traceback" not in done.stderr and "web" in done.stdout, done.stdout + done.stderr
    assert peak_mb < BOUND_MB, peak_mb


@pytest.mark.timeout(300)
@pytest.mark.parametrize("where", ["local", "ssh"])
def test_restart_with_no_room_for_its_launch_copies_stops_nothing(
    tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    """The pass's LOW: the pre-flight wanted 64 KiB free on the state folder, then the restart
    stopped the service and failed writing the launch copy of its 600 KiB env file (the
    service left down); now the copy's size counts, before anything stops."""
    port = free_port()
    env = tmp_path / "web.env"
    env.write_text("A=1\n")
    table = generic_service("web", port, f'ready_path = "/"\nenv_file = "{env}"\n')
    with tmpfs(tmp_path / "state", "512k"):
        spec = _spec(tmp_path, table, _server(where, request))
        record = tmp_path / "state" / "run" / "web.json"
        try:
            code, out, err = servelab_in(tmp_path, "up", "-f", str(spec))
            assert code == 0, out + err
            before = record.read_text()
            pid = json.loads(before)["pid"]
            env.write_text("A=1\n" + "# a comment line of the env file, kept as it is\n" * 12_800)
            code, out, err = servelab_in(tmp_path, "restart", "-f", str(spec), "web")
            assert code == 1, out + err
            assert f"cannot write {tmp_path}/state/backups/web" in err, err
            assert "KiB written there (64 KiB, and a copy of each env and config file)" in err
            assert "(pre-flight: nothing was started or stopped)" in err
            assert alive(pid) and listening(port) and record.read_text() == before
        finally:
            servelab_in(tmp_path, "down", "-f", str(spec))
            for left in live_procs_under(tmp_path):
                os.kill(left, signal.SIGKILL)
