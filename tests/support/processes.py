"""Real processes for tests, and what is running, read straight from ``/proc``.

:func:`http_server` runs ``python -m http.server`` with a chosen environment (a process whose
``/proc/<pid>/environ`` and listening socket the tests inspect). The ``/proc`` readers are
independent of servelab's own code and prove a test left nothing behind: no live process under a
directory, no child of the test process, no socket listening on a port.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

from tests.support import free_port

__all__ = [
    "alive",
    "children",
    "connected",
    "default_stop_signals",
    "held_still",
    "http_server",
    "listening",
    "live_procs_under",
    "wait_answering",
]

_DEAD = ("Z", "X")


def _stat_fields(pid: str) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first)."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()


def _pids() -> list[str]:
    return [entry for entry in os.listdir("/proc") if entry.isdigit()]


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (or dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def default_stop_signals() -> None:
    """A child's ``preexec_fn``: SIGHUP, SIGINT and SIGTERM at their defaults, whatever the test
    run inherited (a suite started under ``nohup`` ignores SIGHUP, and servelab keeps a stop
    signal ignored at its start ignored): for the tests that send the child those signals."""
    for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def held_still(pgid: int, timeout: float = 60.0) -> None:
    """SIGSTOP process group ``pgid``, then wait until every live member is stopped (``T``): a
    SIGSTOP only takes effect when the process next runs, and a signal that arrives before it (a
    command's SIGTERM, its number lower) is taken first: the process would end, not wait."""
    os.killpg(pgid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while True:
        states = []
        for pid in _pids():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = _stat_fields(pid)  # state, ppid, pgrp, ...
                if int(fields[2]) == pgid and fields[0] not in _DEAD:
                    states.append(fields[0])
        if states and all(state in ("T", "t") for state in states):
            return
        assert time.monotonic() < deadline, f"group {pgid} not stopped: {states}"
        time.sleep(0.002)


def live_procs_under(directory: Path) -> list[int]:
    """Live (non-zombie) processes whose working directory is under ``directory``."""
    found = []
    for pid in _pids():
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            state = _stat_fields(pid)[0]
        except OSError:
            continue
        if cwd.startswith(str(directory)) and state not in _DEAD:
            found.append(int(pid))
    return found


def children() -> set[int]:
    """Live (non-zombie) child processes of this process."""
    me, found = os.getpid(), set()
    for pid in _pids():
        try:
            fields = _stat_fields(pid)
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(pid))
    return found


def connected(pid: int, port: int) -> bool:
    """Process ``pid`` holds an open TCP connection to ``port`` (its sockets' inodes found in
    ``/proc/PID/net/tcp``'s rows whose remote port is ``port``)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with_link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if with_link.startswith("socket:["):
                inodes.add(with_link[8:-1])
        rows = Path(f"/proc/{pid}/net/tcp").read_text("ascii").splitlines()[1:]
    except OSError:  # ended, or an fd closed while read
        return False
    for row in rows:
        fields = row.split()
        remote, state, inode = fields[2], fields[3], fields[9]
        if int(remote.rsplit(":", 1)[1], 16) == port and state == "01" and inode in inodes:
            return True  # ESTABLISHED, one of its own
    return False


def listening(port: int) -> bool:
    """Whether any socket on this machine listens on TCP ``port`` (IPv4 or IPv6)."""
    hexport = f":{port:04X} "
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if hexport in f"{fields[1]} " and fields[3] == "0A":
                return True
    return False


@contextlib.contextmanager
def http_server(
    env: Mapping[str, str], cwd: Path | None = None, timeout: float = 15.0
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """``python -m http.server`` on a free loopback port with ``env`` added to its environment.

    Yields (port, process) once it answers HTTP; fails the test if it does not within
    ``timeout``; terminates it afterwards.
    """
    port = free_port()
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    proc = subprocess.Popen(
        argv,
        env={**os.environ, **env},
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_answering(f"http://127.0.0.1:{port}/", proc, time.monotonic() + timeout)
        yield port, proc
    finally:
        proc.terminate()
        proc.wait(5)


def wait_answering(url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Until ``url`` answers HTTP; fails the test if ``proc`` exits or ``timeout`` s pass first."""
    _wait_answering(url, proc, time.monotonic() + timeout)


def _wait_answering(url: str, proc: subprocess.Popen[bytes], deadline: float) -> None:
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, "http.server did not start"
            time.sleep(0.05)
