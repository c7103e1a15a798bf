"""Hosts: where services run. :class:`LocalHost` is this machine;
:class:`~servelab.io.hosts.ssh.SSHHost` is a machine reached over SSH (one connection per host,
reused). Both offer the same coroutines: run a shell command with a timeout, read a file, tell
whether a path exists, list a directory, create a directory, remove a file, replace a file
atomically (optionally with a timestamped backup beside it; env-file backups go under the state
directory instead, :mod:`servelab.io.hosts.envfiles`), read a process's raw environment, tell
which regular files some paths open (a process's ``/proc/PID/fd/1``: its log), find the
process listening on a TCP port, and give a URL this machine can use to reach a service bound on the
host's loopback. :func:`host_for` gives the host a spec names (asyncssh imported only for a
remote one).

Errors: :class:`~servelab.errors.CommandTimeout` when a command outlives its timeout,
:class:`~servelab.errors.HostError` (:class:`~servelab.errors.SSHError` for the connection) for the
rest. OS and asyncssh errors are translated here and nowhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import signal
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from servelab.core.deploy.spec import HostSpec
from servelab.errors import CommandTimeout, HostError
from servelab.io.files import write_atomic

__all__ = [
    "NOT_A_REGULAR_FILE",
    "CommandResult",
    "FileId",
    "Host",
    "LocalHost",
    "backup_name",
    "host_for",
    "parse_proc_net_tcp",
]


@dataclass(frozen=True)
class CommandResult:
    """What a command left behind: its exit status and its decoded output."""

    exit_status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


#: How a read of a file that is not a regular file (a FIFO, a device, a directory, or a link to
#: one) is refused, unread (the end of the :class:`~servelab.errors.HostError`'s message).
NOT_A_REGULAR_FILE = "not a regular file"

#: A regular file's identity: its device and inode (``stat -L``), the same through every path to it.
FileId = tuple[int, int]


class Host(Protocol):
    """What every host offers (local and SSH)."""

    name: str

    @property
    def is_local(self) -> bool: ...

    async def run(
        self, cmd: str, *, timeout: float, input: bytes | None = None
    ) -> CommandResult: ...

    async def read_file(self, path: str, *, limit: int | None = None) -> bytes: ...

    async def read_tail(self, path: str, size: int) -> bytes:
        """The last ``size`` bytes of the regular file at ``path`` (links followed), read from
        there (a 2 GB log is never read whole); anything else (a FIFO, a device: ``/dev/full``
        never ends) is refused unread, the :class:`~servelab.errors.HostError` ending
        :data:`NOT_A_REGULAR_FILE`."""
        ...

    async def exists(self, path: str) -> bool: ...

    async def listdir(self, directory: str) -> list[str]: ...

    async def write_file_atomic(
        self, path: str, data: bytes, *, backup: bool = True
    ) -> str | None: ...

    async def makedirs(self, directory: str) -> None: ...

    async def remove(self, path: str) -> None: ...

    async def read_environ(self, pid: int) -> bytes: ...

    async def file_ids(self, paths: Sequence[str]) -> list[FileId | None]:
        """Each path's :data:`FileId` (links followed: ``/proc/PID/fd/1`` is the file the process
        writes to); None where it is not a regular file or cannot be looked at (another user's
        process)."""
        ...

    async def listening_pid(self, port: int) -> int | None: ...

    async def http_url(self, url: str) -> str: ...

    async def aclose(self) -> None: ...


def backup_name(path: str, now: datetime | None = None) -> str:
    """``PATH.bak-YYYYmmddTHHMMSS.ffffffZ`` (UTC): sorts by time, never collides within a run."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S.%fZ")
    return f"{path}.bak-{stamp}"


def parse_proc_net_tcp(text: str, port: int) -> set[str]:
    """Socket inodes LISTENing on ``port`` in a ``/proc/net/tcp`` or ``tcp6`` table."""
    inodes: set[str] = set()
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != "0A":  # 0A = TCP_LISTEN
            continue
        local_port = int(fields[1].rsplit(":", 1)[1], 16)
        if local_port == port and fields[9] != "0":
            inodes.add(fields[9])
    return inodes


class LocalHost:
    """This machine."""

    def __init__(self, name: str = "local") -> None:
        self.name = name

    @property
    def is_local(self) -> bool:
        return True

    async def run(self, cmd: str, *, timeout: float, input: bytes | None = None) -> CommandResult:
        """Run ``cmd`` with ``/bin/sh`` in its own process group; on timeout the group is killed."""
        try:
            proc = await asyncio.create_subprocess_shell(
                cmd,
                stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise HostError(f"{self.name}: cannot run {cmd!r}: {exc}") from exc
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for loses a cancel (a stop
            # signal) that arrives as the command ends, and the caller goes on as if none came
            async with asyncio.timeout(timeout):
                out, err = await proc.communicate(input)
        except TimeoutError:
            _kill_group(proc.pid)
            await proc.wait()
            raise CommandTimeout(
                f"{self.name}: command timed out after {timeout}s: {cmd}"
            ) from None
        except asyncio.CancelledError:
            _kill_group(proc.pid)
            await proc.wait()
            raise
        assert proc.returncode is not None
        return CommandResult(proc.returncode, _text(out), _text(err))

    async def read_file(self, path: str, *, limit: int | None = None) -> bytes:
        """The file's bytes; with ``limit``, only a regular file (a FIFO or device is refused,
        never waited on) of at most ``limit`` bytes (a larger one is refused, not read whole)."""
        try:
            return await asyncio.to_thread(_read_bounded, Path(path), limit)
        except HostError as exc:
            raise HostError(f"{self.name}: {exc}") from exc
        except OSError as exc:
            raise HostError(f"{self.name}: cannot read {path}: {exc.strerror}") from exc

    async def read_tail(self, path: str, size: int) -> bytes:
        try:
            return await asyncio.to_thread(_read_tail, path, size)
        except HostError as exc:
            raise HostError(f"{self.name}: {exc}") from exc
        except OSError as exc:
            raise HostError(f"{self.name}: cannot read {path}: {exc.strerror}") from exc

    async def exists(self, path: str) -> bool:
        return await asyncio.to_thread(os.path.exists, path)

    async def listdir(self, directory: str) -> list[str]:
        """The names in ``directory`` (without ``.`` and ``..``), unsorted."""
        try:
            return await asyncio.to_thread(os.listdir, directory)
        except OSError as exc:
            raise HostError(f"{self.name}: cannot list {directory}: {exc.strerror}") from exc

    async def write_file_atomic(self, path: str, data: bytes, *, backup: bool = True) -> str | None:
        try:
            return await asyncio.to_thread(_write_atomic, Path(path), data, backup)
        except HostError as exc:
            raise HostError(f"{self.name}: {exc}") from exc
        except OSError as exc:
            raise HostError(f"{self.name}: cannot write {path}: {exc.strerror}") from exc

    async def makedirs(self, directory: str) -> None:
        """Create ``directory`` and its parents (owner-only when new); existing ones are fine."""
        try:
            await asyncio.to_thread(os.makedirs, directory, 0o700, True)
        except OSError as exc:
            raise HostError(f"{self.name}: cannot create {directory}: {exc.strerror}") from exc

    async def remove(self, path: str) -> None:
        """Remove the file at ``path``; a file already gone is fine."""
        try:
            await asyncio.to_thread(Path(path).unlink, True)
        except OSError as exc:
            raise HostError(f"{self.name}: cannot remove {path}: {exc.strerror}") from exc

    async def read_environ(self, pid: int) -> bytes:
        return await self.read_file(f"/proc/{pid}/environ")

    async def file_ids(self, paths: Sequence[str]) -> list[FileId | None]:
        return await asyncio.to_thread(lambda: [_file_id(path) for path in paths])

    async def listening_pid(self, port: int) -> int | None:
        return await asyncio.to_thread(_local_listening_pid, port)

    async def http_url(self, url: str) -> str:
        return url

    async def aclose(self) -> None:
        return None


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "replace")


def _file_id(path: str) -> FileId | None:
    try:
        found = os.stat(path)
    except (OSError, ValueError):  # gone, not ours to look at, or a NUL in the path
        return None
    return (found.st_dev, found.st_ino) if stat.S_ISREG(found.st_mode) else None


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _read_bounded(path: Path, limit: int | None) -> bytes:
    if limit is None:
        return path.read_bytes()
    if not stat.S_ISREG(path.stat().st_mode):
        raise HostError(f"cannot read {path}: {NOT_A_REGULAR_FILE}")
    with path.open("rb") as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise HostError(f"cannot read {path}: larger than {limit} bytes")
    return data


def _read_tail(path: str, size: int) -> bytes:
    """The last ``size`` bytes of a regular file: looked at before it is opened (a device or a
    FIFO is never opened, so never waited on), and again once open."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise HostError(f"cannot read {path}: {NOT_A_REGULAR_FILE}")
    with open(path, "rb") as stream:
        found = os.fstat(stream.fileno())
        if not stat.S_ISREG(found.st_mode):
            raise HostError(f"cannot read {path}: {NOT_A_REGULAR_FILE}")
        stream.seek(max(0, found.st_size - size))
        return stream.read(size)


def _write_atomic(path: Path, data: bytes, backup: bool) -> str | None:
    """The one writer (:mod:`servelab.io.files`: a deployment's file written through its link,
    owner, group and mode kept; a new file owner-only: env files hold secrets); with ``backup``,
    a copy of the current file beside it first (never through a link)."""
    backup_path = None
    exists = path.exists()
    if exists and backup:
        backup_path = backup_name(str(path))
        mode = path.stat().st_mode & 0o7777
        write_atomic(Path(backup_path), path.read_bytes(), mode=mode)
    write_atomic(path, data, mode=None if exists else 0o600, follow_links=True)
    return backup_path


def _local_listening_pid(port: int) -> int | None:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            inodes |= parse_proc_net_tcp(Path(table).read_text(), port)
    if not inodes:
        return None
    targets = {f"socket:[{inode}]" for inode in inodes}
    pids = [pid for pid in _all_pids() if _holds_socket(pid, targets)]
    return min(pids) if pids else None


def _all_pids() -> list[int]:
    with os.scandir("/proc") as entries:
        return [int(entry.name) for entry in entries if entry.name.isdigit()]


def _holds_socket(pid: int, targets: set[str]) -> bool:
    try:
        with os.scandir(f"/proc/{pid}/fd") as fds:
            for fd in fds:
                with contextlib.suppress(OSError):
                    if os.readlink(fd.path) in targets:
                        return True
    except OSError:
        return False
    return False


#: Where :class:`~servelab.io.hosts.ssh.SSHHost` is: imported by name when a host is remote, so a
#: command on local hosts never pays for asyncssh (about 0.25 s of CPU at start-up).
_SSH_MODULE = "servelab.io.hosts.ssh"


def host_for(name: str, spec: HostSpec) -> Host:
    """The host a spec's ``[hosts.NAME]`` describes: this machine when it has no ``ssh``, else
    an :class:`~servelab.io.hosts.ssh.SSHHost` (one connection, opened on first use)."""
    if spec.is_local:
        return LocalHost(name)
    remote: Host = importlib.import_module(_SSH_MODULE).SSHHost(name, spec)
    return remote
