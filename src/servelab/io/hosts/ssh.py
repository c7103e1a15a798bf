"""A host reached over SSH (asyncssh): one connection per host, opened on first use and reused.

Every asyncssh and OS error is translated here: :class:`~servelab.errors.SSHError` for the
connection, :class:`~servelab.errors.HostError` for a command or file that failed,
:class:`~servelab.errors.CommandTimeout` for a command that outlived its timeout. Files are read and
written through plain POSIX shell commands (no SFTP subsystem needed on the server).
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncssh

from servelab.core.deploy.spec import HostSpec
from servelab.errors import CommandTimeout, HostError, SSHError
from servelab.io.files import REMOTE_WRITE_SCRIPT
from servelab.io.hosts.host import (
    NOT_A_REGULAR_FILE,
    CommandResult,
    FileId,
    backup_name,
    parse_proc_net_tcp,
)

__all__ = ["SSHHost"]


class SSHHost:
    """A machine reached over SSH, per a spec's ``[hosts.NAME]`` with ``ssh = "user@host"``."""

    def __init__(self, name: str, spec: HostSpec) -> None:
        assert spec.ssh is not None
        self.name = name
        self.spec = spec
        self.user, self.address = spec.ssh.split("@")
        self._conn: asyncssh.SSHClientConnection | None = None
        self._lock = asyncio.Lock()
        self._forwards: dict[tuple[str, int], Any] = {}

    @property
    def is_local(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"SSHHost({self.name!r}, {self.spec.ssh}:{self.spec.port})"

    async def _connection(self) -> asyncssh.SSHClientConnection:
        async with self._lock:
            if self._conn is not None:
                return self._conn
            options: dict[str, Any] = {
                "port": self.spec.port,
                "username": self.user,
                "known_hosts": self.spec.known_hosts,
                "connect_timeout": self.spec.connect_timeout_s,
            }
            if self.spec.identity_file is not None:
                options["client_keys"] = [self.spec.identity_file]
            try:
                self._conn = await asyncssh.connect(self.address, **options)
            except (OSError, asyncssh.Error, TimeoutError) as exc:
                raise SSHError(
                    f"{self.name}: cannot connect to {self.spec.ssh} port {self.spec.port}: "
                    f"{_describe(exc)}"
                ) from exc
            return self._conn

    async def run(self, cmd: str, *, timeout: float, input: bytes | None = None) -> CommandResult:
        conn = await self._connection()
        # Empty input is an empty stdin (asyncssh writes no end of file for b"": `cat` would wait).
        stdin: Any = {"stdin": asyncssh.DEVNULL} if input == b"" else {"input": input}
        try:
            result = await conn.run(cmd, timeout=timeout, encoding=None, **stdin)
        except asyncssh.TimeoutError as exc:
            raise CommandTimeout(
                f"{self.name}: command timed out after {timeout}s over SSH: {cmd}"
            ) from exc
        except asyncssh.ChannelOpenError as exc:
            await self._drop()
            raise SSHError(f"{self.name}: SSH channel refused: {_describe(exc)}") from exc
        except (OSError, asyncssh.Error) as exc:
            await self._drop()
            raise SSHError(f"{self.name}: SSH command failed: {_describe(exc)}") from exc
        status = result.exit_status if result.exit_status is not None else 255
        return CommandResult(status, _text(result.stdout), _text(result.stderr))

    @property
    def _file_timeout(self) -> float:
        return max(30.0, self.spec.connect_timeout_s)

    async def _checked(self, cmd: str, what: str, *, input: bytes | None = None) -> CommandResult:
        result = await self.run(cmd, timeout=self._file_timeout, input=input)
        if not result.ok:
            raise HostError(f"{self.name}: {what}: {result.stderr.strip() or result.exit_status}")
        return result

    async def read_file(self, path: str, *, limit: int | None = None) -> bytes:
        quoted = shlex.quote(path)
        cmd = f"cat -- {quoted}"
        if limit is not None:
            cmd = (
                f"if [ ! -f {quoted} ]; then echo '{NOT_A_REGULAR_FILE}' >&2; exit 1; fi; "
                f"head -c {limit + 1} -- {quoted}"
            )
        data = await self._read(path, cmd)
        if limit is not None and len(data) > limit:
            raise HostError(f"{self.name}: cannot read {path}: larger than {limit} bytes")
        return data

    async def read_tail(self, path: str, size: int) -> bytes:
        """``tail -c SIZE`` of a regular file (it seeks: a 2 GB log is not read whole); anything
        else refused unread (:meth:`~servelab.io.hosts.host.Host.read_tail`)."""
        quoted = shlex.quote(path)
        cmd = (
            f"[ -e {quoted} ] || {{ echo 'No such file or directory' >&2; exit 1; }}; "
            f"[ -f {quoted} ] || {{ echo '{NOT_A_REGULAR_FILE}' >&2; exit 1; }}; "
            f"tail -c {int(size)} -- {quoted}"
        )
        return await self._read(path, cmd)

    async def _read(self, path: str, cmd: str) -> bytes:
        """``cmd``'s standard output as bytes (a file read); a failure names ``path``."""
        conn = await self._connection()
        try:
            result = await conn.run(cmd, timeout=30, encoding=None)
        except (OSError, asyncssh.Error) as exc:
            raise SSHError(f"{self.name}: cannot read {path}: {_describe(exc)}") from exc
        if result.exit_status != 0:
            raise HostError(f"{self.name}: cannot read {path}: {_text(result.stderr).strip()}")
        out = result.stdout
        return out if isinstance(out, bytes) else (out or "").encode()

    async def exists(self, path: str) -> bool:
        result = await self.run(f"test -e {shlex.quote(path)}", timeout=self._file_timeout)
        return result.ok

    async def listdir(self, directory: str) -> list[str]:
        """The names in ``directory`` (without ``.`` and ``..``), unsorted."""
        result = await self._checked(
            f"ls -1A -- {shlex.quote(directory)}", f"cannot list {directory}"
        )
        return result.stdout.splitlines()

    async def write_file_atomic(self, path: str, data: bytes, *, backup: bool = True) -> str | None:
        target = backup_name(path) if backup else ""
        script = REMOTE_WRITE_SCRIPT.format(path=shlex.quote(path), backup=shlex.quote(target))
        result = await self._checked(
            f"sh -c {shlex.quote(script)}", f"cannot write {path}", input=data
        )
        written = result.stdout.strip()
        return written or None

    async def makedirs(self, directory: str) -> None:
        """Create ``directory`` and its parents (owner-only when new); existing ones are fine."""
        quoted = shlex.quote(directory)
        await self._checked(f"mkdir -p -m 700 -- {quoted}", f"cannot create {directory}")

    async def remove(self, path: str) -> None:
        """Remove the file at ``path``; a file already gone is fine."""
        await self._checked(f"rm -f -- {shlex.quote(path)}", f"cannot remove {path}")

    async def read_environ(self, pid: int) -> bytes:
        return await self.read_file(f"/proc/{pid}/environ")

    async def file_ids(self, paths: Sequence[str]) -> list[FileId | None]:
        """One line per path, in order (``-``: none), from one command."""
        if not paths:
            return []
        each = (f"stat -L -c '%d %i %F' -- {shlex.quote(p)} 2>/dev/null || echo -" for p in paths)
        result = await self.run("; ".join(each), timeout=self._file_timeout)
        lines = result.stdout.splitlines()
        return [_file_id(lines[i] if i < len(lines) else "-") for i in range(len(paths))]

    async def listening_pid(self, port: int) -> int | None:
        tables = await self.run("cat /proc/net/tcp /proc/net/tcp6 2>/dev/null", timeout=30)
        # Header lines ("sl local_address ...") never match: their state column is "st".
        inodes = parse_proc_net_tcp("\n" + tables.stdout, port)
        if not inodes:
            return None
        patterns = " -o ".join(f"-lname 'socket:\\[{inode}\\]'" for inode in sorted(inodes))
        found = await self.run(f"find /proc/[0-9]*/fd \\( {patterns} \\) 2>/dev/null", timeout=30)
        pids = []
        for line in found.stdout.split():
            parts = line.split("/")
            if len(parts) > 2 and parts[2].isascii() and parts[2].isdigit():
                pids.append(int(parts[2]))
        return min(pids) if pids else None

    async def http_url(self, url: str) -> str:
        """A local URL forwarded (once, then reused) to ``url`` as seen from the remote host."""
        parts = urlsplit(url)
        key = (parts.hostname or "127.0.0.1", parts.port or 80)
        listener = self._forwards.get(key)
        if listener is None:
            conn = await self._connection()
            try:
                listener = await conn.forward_local_port("127.0.0.1", 0, key[0], key[1])
            except (OSError, asyncssh.Error) as exc:
                raise SSHError(f"{self.name}: cannot forward to {url}: {_describe(exc)}") from exc
            self._forwards[key] = listener
        netloc = f"127.0.0.1:{listener.get_port()}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def aclose(self) -> None:
        for listener in self._forwards.values():
            listener.close()
        self._forwards.clear()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            await conn.wait_closed()


def _text(data: bytes | str | None) -> str:
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data or ""


def _describe(exc: BaseException) -> str:
    """``ConnectionRefusedError: [Errno 111] ...``; an error without words says what it is
    (a connect that timed out: ``no answer (timed out)``, not ``TimeoutError: TimeoutError``)."""
    text = str(exc)
    if text:
        return f"{type(exc).__name__}: {text}"
    if isinstance(exc, TimeoutError):
        return "no answer (timed out)"
    return type(exc).__name__


def _file_id(line: str) -> FileId | None:
    """``stat -c '%d %i %F'``'s line as a :data:`FileId`; None unless a regular file's."""
    device, _, rest = line.partition(" ")
    inode, _, kind = rest.partition(" ")
    ok = (
        (device + inode).isascii()
        and device.isdigit()
        and inode.isdigit()
        and kind.startswith("regular")
    )
    return (int(device), int(inode)) if ok else None
