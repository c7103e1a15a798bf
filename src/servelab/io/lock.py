"""One operator at a time per deployment: the lock a command holds while it changes or measures
the deployment (``up``, ``down``, ``restart``, ``knob set``, ``bench``, ``ab``, ``soak``, ``case
revert|test``, ``restore``).

The lock is the file ``lock`` in the deployment's state directory, beside the pid records (they
are kept here, on the machine servelab runs on, for services on SSH hosts too: the lock is where
the state is), held with ``flock(2)``. The kernel releases it when its holder exits, however it
exits, so a lock is never held by a dead process. The file also names its holder (command, pid,
start time) for the refusal another command prints; a holder that ends empties it, so a name
found there once the lock is free is a holder that died (``kill -9``, a crash, the machine): the
next command takes the lock over and says so (:attr:`DeploymentLock.taken_over`).

The file descriptor is not inherited (``O_CLOEXEC``): a service a command launches never holds
its lock. Within one process the lock is re-entrant: code that takes it while its command already
holds it shares it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from servelab.errors import DeploymentBusy, HostError

__all__ = ["LOCK_FILE", "POLL_S", "DeploymentLock", "Holder", "hold", "holder_of"]

#: The lock's file name in the state directory.
LOCK_FILE = "lock"
#: Seconds between two tries of a command that waits for the lock (``--wait``).
POLL_S = 0.1
_MAX_HOLDER_BYTES = 4096


@dataclass(frozen=True)
class Holder:
    """Who holds a deployment's lock: the command (its name, never its arguments: they may hold
    a value), its pid, and when it took the lock (UTC, ISO 8601)."""

    command: str
    pid: int
    started_at: str

    @classmethod
    def this_process(cls, command: str) -> Holder:
        stamp = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        return cls(command, os.getpid(), stamp)

    def describe(self) -> str:
        """``servelab restart`` (pid 123, since 2026-01-02T03:04:05Z)."""
        return f"`{self.command}` (pid {self.pid}, since {self.started_at})"


@dataclass
class DeploymentLock:
    """A held lock: its file, who holds it (this process), and the holder of the lock a dead
    process left behind when this one took it over (None: the lock was free)."""

    path: Path
    holder: Holder
    taken_over: Holder | None
    _fd: int
    _depth: int = 1

    def release(self) -> None:
        """Empty the file (the holder ended well) and unlock it; the last of nested holds only."""
        self._depth -= 1
        if self._depth > 0:
            return
        _HELD.pop(self.path, None)
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        os.close(self._fd)  # closing the descriptor releases the flock


#: The locks this process holds, by path (for re-entry).
_HELD: dict[Path, DeploymentLock] = {}


def _parse(raw: bytes) -> Holder | None:
    try:
        data = json.loads(raw.decode("utf-8"))
        return Holder(str(data["command"]), int(data["pid"]), str(data["started_at"]))
    except (ValueError, KeyError, TypeError):
        return None


def _read(fd: int) -> Holder | None:
    return _parse(os.pread(fd, _MAX_HOLDER_BYTES, 0))


def holder_of(state_dir: Path) -> Holder | None:
    """Who the lock file of ``state_dir`` names (None: no file, empty, or unreadable); the lock
    itself is not tried."""
    try:
        return _parse((state_dir / LOCK_FILE).read_bytes()[:_MAX_HOLDER_BYTES])
    except OSError:
        return None


def _try(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _refusal(name: str, path: Path, holder: Holder | None) -> DeploymentBusy:
    who = holder.describe() if holder is not None else "another command (starting)"
    return DeploymentBusy(
        f"deployment {name} is busy: {who} holds its lock {path}; rerun with --wait to queue "
        "behind it"
    )


def _open(path: Path) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise HostError(f"cannot open the deployment lock {path}: {exc.strerror}") from exc


def _acquire(
    path: Path, name: str, holder: Holder, wait: bool, on_wait: Callable[[Holder | None], None]
) -> DeploymentLock:
    fd = _open(path)
    try:
        told = False
        while not _try(fd):
            current = _read(fd)
            if not wait:
                raise _refusal(name, path, current)
            if not told:
                on_wait(current)
                told = True
            time.sleep(POLL_S)
        left = _read(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(asdict(holder)) + "\n").encode(), 0)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        raise
    return DeploymentLock(path, holder, left, fd)


def _silent(_holder: Holder | None) -> None:
    return None


@contextlib.contextmanager
def hold(
    state_dir: Path,
    command: str,
    *,
    name: str,
    wait: bool = False,
    on_wait: Callable[[Holder | None], None] = _silent,
) -> Iterator[DeploymentLock]:
    """Hold the lock of the deployment whose state directory is ``state_dir`` for the block.

    Held by another process: :class:`~servelab.errors.DeploymentBusy` naming it (``name`` is the
    deployment's), or with ``wait``, ``on_wait(holder)`` once and a try every :data:`POLL_S`
    until it is free. ``command`` names this process in the file (``servelab restart``).
    """
    path = Path(os.path.abspath(state_dir / LOCK_FILE))
    lock = _HELD.get(path)
    if lock is not None:
        lock._depth += 1
    else:
        lock = _HELD[path] = _acquire(path, name, Holder.this_process(command), wait, on_wait)
    try:
        yield lock
    finally:
        lock.release()
