"""A real systemd for the tests: PID 1 of its own namespaces, reached over a real sshd.

``start_systemd(directory, share)`` runs ``tests/support/systemd-ns.sh``: in a fresh cgroup v2
directory it unshares PID, mount, UTS, IPC and cgroup namespaces and execs ``/lib/systemd/systemd``
as their PID 1, with ``directory / "units"`` as its only unit directory (no tmpfiles, journald,
udev or generators: nothing but the units written there), the host's file system read-only, and
private ``/run``, ``/tmp``, ``/var/tmp``, ``/dev`` and cgroup tree. The network is the host's, so
an sshd that systemd runs as a unit (``servelab-sshd.service``, keys and config from
:func:`tests.support.sshd.configure_sshd`) listens on a free loopback port: servelab reaches the
namespace as an SSH host, and there ``systemctl`` and ``/proc/PID`` see the units' processes.
``share`` (a directory holding ``directory``, e.g. pytest's base temp) stays shared and writable
at the same path, so the tests' spec, env and state files are the same on both sides.

:meth:`SystemdHost.add_unit` writes a unit and reloads systemd; :meth:`SystemdHost.stop` kills
the namespace's PID 1 (the kernel then kills everything inside) and removes the cgroup, bounded
in time. Should the tests die instead, the parent-death signal and ``unshare --kill-child`` take
the namespace along.

Needs root, ``/lib/systemd/systemd``, util-linux (``unshare``, ``setpriv``, ``nsenter``), a
writable cgroup v2 hierarchy and OpenSSH's server; a developer without them skips, CI and root
fail with the reason (:func:`tests.support.sysdeps.missing`).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from itertools import count
from pathlib import Path

import pytest

from tests.support.sshd import SSHD, SshdServer, configure_sshd, require_sshd, wait_listening
from tests.support.sysdeps import missing

__all__ = ["SYSTEMD", "TARGET", "SystemdHost", "require_systemd", "start_systemd"]

SYSTEMD = Path("/lib/systemd/systemd")
#: The unit PID 1 starts (``--unit=``): it wants the sshd and nothing else.
TARGET = "servelab-test.target"
_SCRIPT = Path(__file__).with_name("systemd-ns.sh")
_TOOLS = ("unshare", "setpriv", "nsenter")
_SERIAL = count()

# Every accounting off: the namespace's cgroup tree has no controllers anyway.
_SYSTEM_CONF = """[Manager]
DefaultStandardOutput=null
DefaultStandardError=null
DefaultCPUAccounting=no
DefaultIOAccounting=no
DefaultIPAccounting=no
DefaultBlockIOAccounting=no
DefaultMemoryAccounting=no
DefaultTasksAccounting=no
"""

# The units a service's default dependencies name; empty, so they are reached at once.
_BASE_UNITS = {
    "sysinit.target": "[Unit]\nDescription=System Initialization (empty)\n",
    "basic.target": "[Unit]\nDescription=Basic System (empty)\n",
    "shutdown.target": "[Unit]\nDescription=Shutdown\nDefaultDependencies=no\n",
    "system.slice": "[Unit]\nDescription=System Slice\n",
    TARGET: "[Unit]\nDescription=servelab tests\nWants=servelab-sshd.service\n",
}

_SSHD_UNIT = """[Unit]
Description=OpenSSH server of the servelab tests
[Service]
ExecStartPre=/bin/mkdir -p /run/sshd
ExecStart={sshd} -D -f {config} -e
StandardError=append:{log}
"""


@dataclass
class SystemdHost:
    """A running private systemd and the sshd it runs: where to reach it, how to drive it."""

    sshd: SshdServer
    directory: Path
    share: Path
    cgroup: Path
    process: subprocess.Popen[bytes]

    @property
    def units(self) -> Path:
        return self.directory / "units"

    def init_pid(self) -> int | None:
        """The host's pid of the namespace's PID 1 (unshare's child), None once it is gone."""
        try:
            text = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text()
        except OSError:
            return None
        return int(text.split()[0]) if text.split() else None

    def nsenter(self, *argv: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside the namespaces (not over SSH: the fixture's own plumbing)."""
        pid = self.init_pid()
        if pid is None:
            raise RuntimeError(f"the private systemd is gone; its log: {self.log()[-2000:]}")
        return subprocess.run(
            ["nsenter", "-t", str(pid), "-a", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def systemctl(self, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return self.nsenter("systemctl", "--no-pager", *args, timeout=timeout)

    def add_unit(self, name: str, text: str) -> Path:
        """Write unit ``name`` into the namespace's unit directory and reload systemd."""
        path = self.units / name
        path.write_text(text)
        reloaded = self.systemctl("daemon-reload")
        if reloaded.returncode != 0:
            raise RuntimeError(f"systemctl daemon-reload failed: {reloaded.stderr.strip()}")
        return path

    def log(self) -> str:
        path = self.directory / "systemd.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self, timeout: float = 10.0) -> None:
        """Kill the namespace's PID 1 (and so all inside), wait for it, remove the cgroup."""
        pid = self.init_pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_cgroup(self.cgroup)
            self.process.kill()
            self.process.wait(timeout=timeout)
        _remove_cgroup(self.cgroup, time.monotonic() + timeout)


def _kill_cgroup(cgroup: Path) -> None:
    kill = cgroup / "cgroup.kill"
    if kill.exists():
        kill.write_text("1")


def _remove_cgroup(cgroup: Path, deadline: float) -> None:
    """Remove ``cgroup`` and the directories systemd made in it, deepest first, once empty."""
    while cgroup.exists():
        inside = sorted(cgroup.rglob("*"), key=lambda p: len(p.parts), reverse=True)
        for path in [*inside, cgroup]:
            if path.is_dir():
                with contextlib.suppress(OSError):  # still populated: the kernel is reaping it
                    path.rmdir()
        if time.monotonic() > deadline:
            raise RuntimeError(f"cgroup {cgroup} is still populated after the namespace was killed")
        if cgroup.exists():
            time.sleep(0.05)


def _sweep(parent: Path) -> None:
    """Remove the cgroups of earlier runs whose tests died (their pid, in the name, is gone)."""
    for stale in parent.glob("servelab-systemd-*-*"):
        pid = stale.name.split("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(RuntimeError):
                _remove_cgroup(stale, time.monotonic() + 1.0)


def _cgroup2_parent() -> Path | None:
    """This process's directory in the cgroup v2 hierarchy, when one is mounted writable."""
    mount = None
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        if fstype == "cgroup2" and "rw" in fields[5].split(","):
            mount = Path(fields[4])
    own = [ln[3:] for ln in Path("/proc/self/cgroup").read_text().splitlines() if ln[:3] == "0::"]
    if mount is None or not own:
        return None
    return mount / own[0].lstrip("/")


def require_systemd(systemd: Path = SYSTEMD) -> Path:
    """Skip (a developer without root) or fail (CI, root) unless a private systemd can start;
    the cgroup v2 directory to start it under."""
    require_sshd()
    if not systemd.exists():
        missing(f"{systemd} is missing (package systemd)")
    if os.geteuid() != 0:
        missing("a private systemd needs root (PID, mount and cgroup namespaces)")
    absent = [tool for tool in _TOOLS if shutil.which(tool) is None]
    if absent:
        missing(f"{', '.join(absent)} missing (package util-linux)")
    parent = _cgroup2_parent()
    if parent is None or not os.access(parent, os.W_OK):
        missing("no writable cgroup v2 hierarchy for a private systemd")
    return parent


def _write_units(directory: Path, sshd_config: Path, sshd_log: Path) -> None:
    units = directory / "units"
    units.mkdir(parents=True, exist_ok=True)
    for name, text in _BASE_UNITS.items():
        (units / name).write_text(text)
    (units / "servelab-sshd.service").write_text(
        _SSHD_UNIT.format(sshd=SSHD, config=sshd_config, log=sshd_log)
    )
    (directory / "system.conf").write_text(_SYSTEM_CONF)
    (directory / "machine-id").write_text(uuid.uuid4().hex + "\n")


def start_systemd(directory: Path, share: Path, *, timeout: float = 30.0) -> SystemdHost:
    """Start a private systemd and its sshd (see the module); :func:`require_systemd` first.
    ``directory`` must lie inside ``share``."""
    parent = require_systemd()
    directory, share = directory.resolve(), share.resolve()
    port, config = configure_sshd(directory / "sshd")
    _write_units(directory, config, directory / "sshd" / "sshd.log")
    _sweep(parent)
    cgroup = parent / f"servelab-systemd-{os.getpid()}-{next(_SERIAL)}"
    cgroup.mkdir()
    log = (directory / "launcher.log").open("ab")
    process = subprocess.Popen(
        [str(_SCRIPT), "outer", str(cgroup), str(directory), str(share)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
    )
    log.close()
    sshd_dir = directory / "sshd"
    sshd = SshdServer(port, getpass.getuser(), sshd_dir / "client_key", sshd_dir, process)
    host = SystemdHost(sshd, directory, share, cgroup, process)
    try:
        _wait_running(host, time.monotonic() + timeout)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        launcher = (directory / "launcher.log").read_text(errors="replace")[-2000:]
        host.stop()
        pytest.fail(
            f"a private systemd did not start: {exc}; launcher: {launcher!r}; "
            f"systemd log: {host.log()[-2000:]!r}"
        )
    return host


def _wait_running(host: SystemdHost, deadline: float) -> None:
    """Until PID 1 reports running (every unit it was asked for started) and sshd listens."""
    state = ""
    while time.monotonic() < deadline:
        if host.process.poll() is not None:
            raise RuntimeError(f"the namespace exited with status {host.process.returncode}")
        if host.init_pid() is not None:
            state = host.systemctl("is-system-running", timeout=5).stdout.strip()
            if state in ("running", "degraded"):
                break
        time.sleep(0.1)
    else:
        raise RuntimeError(f"systemd is not running in time (is-system-running: {state!r})")
    if state == "degraded":
        failed = host.systemctl("--failed", "--plain").stdout
        raise RuntimeError(f"systemd is degraded: {failed.strip()}")
    wait_listening(host.sshd.port, lambda: host.process.poll() is None, deadline)
