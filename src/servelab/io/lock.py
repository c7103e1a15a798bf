"""One operator at a time per deployment, and traffic beside a rolling restart: the holds a
command takes while it changes or measures the deployment.

A deployment's lock is two files per place, held with ``flock(2)``:

- ``lock``, the change lock: held by every command that changes the deployment (``up``, ``down``,
  ``restart``, ``knob set``, ``ab``, ``tune``, ``case revert|test|bisect``, ``restore``, and
  ``restart --rolling``);
- ``lock.traffic``, the measurement lock: held by every command that sends measured traffic
  (``bench`` and ``soak`` with a spec) and by every change that would disturb it (all of the above
  but ``restart --rolling``, which exists to run under traffic).

``verify`` holds the change lock as it reads (:attr:`Hold.INSPECT`): it never judges a
half-restarted deployment, and it runs beside a measurement.

So a rolling restart runs under a ``bench -f SPEC`` of the same deployment (:attr:`Hold.ROLL` takes
the change lock only), while a plain restart, ``up``, ``down`` or an A/B refuses to run under a
measurement, naming it (:attr:`Hold.CHANGE` takes both); two measurements, or two changes, never
run at once.

The places are the deployment's state directory (beside the pid records; for services on SSH
hosts too: the lock is where the state is) and one directory per endpoint the deployment owns
(:func:`servelab.core.deploy.ownership.owned_endpoints`, under :func:`lock_root`): a second spec
that names the same processes under another ``state_dir`` meets the same lock. Only commands run
on this machine meet each other: two operators on two machines do not.

The kernel releases a lock when its holder exits, however it exits, so a lock is never held by a
dead process. Each file also names its holder (command, pid, start time) for the refusal another
command prints; a holder that ends empties it, so a name found there once the lock is free is a
holder that died (``kill -9``, a crash, the machine): the next command takes the lock over and
says so (:attr:`DeploymentLock.taken_over`). A waiter (``--wait``) holds nothing while it waits.

A lock file whose holder's name cannot be written (a full disk, a read-only state directory:
an existing file is then opened read-only, as ``flock(2)`` needs no write) is held all the same,
unnamed: the lock is the ``flock``, the name only words a refusal ("another command"), so ``down``
on a full disk still stops the deployment. :attr:`DeploymentLock.unnamed` says which file and why.
Anything else standing where a lock file should be (a directory, a FIFO, a link) is a
:class:`~servelab.errors.HostError` naming the path and what it is; nothing waits on a FIFO.

The file descriptors are not inherited (``O_CLOEXEC``): a service a command launches never holds
its lock. Within one process the lock is re-entrant: code that takes it while its command already
holds it shares it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from servelab.errors import DeploymentBusy, HostError
from servelab.io.signalsdeferred import stop_signals_deferred

__all__ = [
    "LOCK_DIR_ENV",
    "LOCK_FILE",
    "POLL_S",
    "TRAFFIC_FILE",
    "DeploymentLock",
    "Hold",
    "Holder",
    "endpoint_dir",
    "hold",
    "holder_of",
    "lock_root",
]

#: The change lock's file name in each place (the state directory, each endpoint's directory).
LOCK_FILE = "lock"
#: The measurement lock's file name in each place.
TRAFFIC_FILE = "lock.traffic"
#: The environment variable naming the directory of the endpoints' locks (:func:`lock_root`).
LOCK_DIR_ENV = "SERVELAB_LOCK_DIR"
#: Seconds between two tries of a command that waits for the lock (``--wait``).
POLL_S = 0.1
_MAX_HOLDER_BYTES = 4096


class Hold(StrEnum):
    """What a command does to the deployment while it holds the lock."""

    #: Changes it, stopping or disturbing traffic (up, down, restart, knob set, ab, tune, case).
    CHANGE = "change"
    #: Sends measured traffic (bench, soak): beside a rolling restart, never beside a change.
    MEASURE = "measure"
    #: Restarts workers one at a time through the router (restart --rolling): under traffic.
    ROLL = "roll"
    #: Reads and judges it (verify): never during a change or a rolling restart; beside traffic.
    INSPECT = "inspect"


_FILES: dict[Hold, tuple[str, ...]] = {
    Hold.CHANGE: (LOCK_FILE, TRAFFIC_FILE),
    Hold.MEASURE: (TRAFFIC_FILE,),
    Hold.ROLL: (LOCK_FILE,),
    Hold.INSPECT: (LOCK_FILE,),
}


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
class _FileLock:
    """One held lock file, shared by the holds of this process that include it."""

    path: Path
    taken_over: Holder | None
    fd: int
    depth: int = 1
    #: Why this process's name could not be written into the file (None: it was written).
    unnamed: str | None = None

    def release(self) -> None:
        """Empty the file (the holder ended well) and unlock it; the last of nested holds only."""
        self.depth -= 1
        if self.depth > 0:
            return
        _FILES_HELD.pop(self.path, None)
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)
        os.close(self.fd)  # closing the descriptor releases the flock


@dataclass
class DeploymentLock:
    """A held lock: its first file, who holds it (this process), and the holder of a lock a dead
    process left behind when this one took it over (None: every file was free), with the file it
    was found in."""

    path: Path
    holder: Holder
    taken_over: Holder | None
    taken_over_path: Path | None
    _files: tuple[_FileLock, ...]
    _key: tuple[Path, ...]
    _depth: int = 1

    @property
    def unnamed(self) -> tuple[Path, str] | None:
        """The first file held without this process's name in it, and why (None: all named)."""
        found = next((lock for lock in self._files if lock.unnamed is not None), None)
        return None if found is None or found.unnamed is None else (found.path, found.unnamed)

    def release(self) -> None:
        """Release every file; the last of nested holds of the same files only. A stop signal
        that comes meanwhile waits until every file is released (one cut in the middle would
        leave the rest naming this process: the next command would say it "took over")."""
        self._depth -= 1
        if self._depth > 0:
            return
        _HELD.pop(self._key, None)
        with stop_signals_deferred():
            for lock in reversed(self._files):
                lock.release()


#: The lock files, and the holds, this process holds (for re-entry).
_FILES_HELD: dict[Path, _FileLock] = {}
_HELD: dict[tuple[Path, ...], DeploymentLock] = {}


def _parse(raw: bytes) -> Holder | None:
    try:
        data = json.loads(raw.decode("utf-8"))
        return Holder(str(data["command"]), int(data["pid"]), str(data["started_at"]))
    except (ValueError, KeyError, TypeError):
        return None


def _read(fd: int) -> Holder | None:
    return _parse(os.pread(fd, _MAX_HOLDER_BYTES, 0))


def holder_of(place: Path, file: str = LOCK_FILE) -> Holder | None:
    """Who the lock file ``file`` of ``place`` (a state directory, or :func:`endpoint_dir`) names
    (None: no file, empty, unreadable, or not a regular file: a FIFO is never read); the lock
    itself is not tried."""
    if _not_a_file(place / file) is not None:
        return None
    try:
        return _parse((place / file).read_bytes()[:_MAX_HOLDER_BYTES])
    except OSError:
        return None


def lock_root() -> Path:
    """The directory of the endpoints' locks: ``$SERVELAB_LOCK_DIR`` (absolute), else a directory
    of this user's own (mode 0700) in ``/run/lock``, else in the system's temporary directory."""
    named = os.environ.get(LOCK_DIR_ENV, "").strip()
    if named:
        if not os.path.isabs(named):  # relative: two commands in two folders would not meet
            raise HostError(f"{LOCK_DIR_ENV} must be an absolute path, got {named!r}")
        return Path(named)
    base = "/run/lock" if os.access("/run/lock", os.W_OK | os.X_OK) else tempfile.gettempdir()
    return Path(base) / f"servelab-{os.getuid()}"


def endpoint_dir(root: Path, machine: str, port: int) -> Path:
    """The lock directory of one endpoint a deployment owns."""
    return root / f"{re.sub(r'[^A-Za-z0-9.-]', '_', machine)}_{port}"


def _own_root(root: Path) -> None:
    """Make the default lock root this user's own, refusing one someone else made (a link, a
    file, another owner: its locks could be held or swapped by them)."""
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(root)
    except OSError as exc:
        raise HostError(f"cannot make the lock directory {root}: {exc.strerror}") from exc
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise HostError(
            f"the lock directory {root} is not a directory of this user's own; set "
            f"{LOCK_DIR_ENV} to another"
        )


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


#: How a lock file is opened: never through a link, never inherited, and never waiting (a FIFO
#: put where the file should be would block an open for reading until a writer came).
_FLAGS = os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK


def _not_a_file(path: Path) -> str | None:
    """What stands at ``path`` when it is there and is not a regular file (``a directory``)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return "a symbolic link" if stat.S_ISLNK(mode) else "a device or socket"


def _refuse_other(path: Path, fd: int | None = None) -> None:
    """A :class:`~servelab.errors.HostError` naming ``path`` and what it is when it is not a
    regular file (a directory or a FIFO put there: flock would hold it, but its holder could
    not be read or written), closing ``fd``."""
    kind = _not_a_file(path)
    if kind is None and fd is not None and not stat.S_ISREG(os.fstat(fd).st_mode):
        kind = "not a regular file"
    if kind is None:
        return
    if fd is not None:
        os.close(fd)
    raise HostError(
        f"the deployment lock {path} is {kind}, not a lock file: remove it (servelab makes "
        "the file again)"
    )


def _open(path: Path) -> tuple[int, str | None]:
    """The lock file opened for writing, or read-only when only that is possible (a read-only
    or full state directory where it exists: then why it cannot be written). Anything but a
    regular file there (a directory, a FIFO, a link) is a HostError naming it, never a wait."""
    _refuse_other(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, why = os.open(path, os.O_RDWR | os.O_CREAT | _FLAGS, 0o644), None
    except OSError as exc:
        why = exc.strerror or str(exc)
        try:
            fd = os.open(path, os.O_RDONLY | _FLAGS)
        except OSError:
            _refuse_other(path)
            raise HostError(f"cannot open the deployment lock {path}: {why}") from exc
    _refuse_other(path, fd)
    return fd, why


def _name(fd: int, holder: Holder) -> str | None:
    """Write ``holder`` into the held file; why it could not be (None: written)."""
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(asdict(holder)) + "\n").encode(), 0)
        os.fsync(fd)
    except OSError as exc:  # a full disk: the flock holds all the same, unnamed
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)  # never half a name
        return exc.strerror or str(exc)
    return None


def _take(path: Path, holder: Holder) -> _FileLock | Holder | None:
    """The lock file at ``path`` taken (held already by this process: shared), or whom the file
    names while another process holds it (None: unnamed, it is starting)."""
    held = _FILES_HELD.get(path)
    if held is not None:
        held.depth += 1
        return held
    fd, unwritable = _open(path)
    try:
        if not _try(fd):
            busy = _read(fd)
            os.close(fd)
            return busy
        left = _read(fd)
        unnamed = unwritable if unwritable is not None else _name(fd, holder)
    except BaseException:
        os.close(fd)
        raise
    lock = _FILES_HELD[path] = _FileLock(path, left, fd, unnamed=unnamed)
    return lock


@dataclass(frozen=True)
class _Busy:
    """A lock file another process holds, and whom it names (None: it is starting)."""

    path: Path
    holder: Holder | None


def _take_all(paths: Sequence[Path], holder: Holder) -> tuple[_FileLock, ...] | _Busy:
    """Every file taken, or none (what was taken given back) and the first busy one."""
    taken: list[_FileLock] = []
    try:
        for path in paths:
            got = _take(path, holder)
            if not isinstance(got, _FileLock):
                for lock in reversed(taken):
                    lock.release()
                return _Busy(path, got)
            taken.append(got)
    except BaseException:
        for lock in reversed(taken):
            lock.release()
        raise
    return tuple(taken)


def _acquire(
    paths: tuple[Path, ...],
    name: str,
    holder: Holder,
    wait: bool,
    on_wait: Callable[[Holder | None], None],
) -> DeploymentLock:
    told = False
    while isinstance(got := _take_all(paths, holder), _Busy):
        if not wait:
            raise _refusal(name, got.path, got.holder)
        if not told:
            on_wait(got.holder)
            told = True
        time.sleep(POLL_S)
    found = next((lock for lock in got if lock.taken_over is not None), None)
    return DeploymentLock(
        path=paths[0],
        holder=holder,
        taken_over=None if found is None else found.taken_over,
        taken_over_path=None if found is None else found.path,
        _files=got,
        _key=paths,
    )


def _silent(_holder: Holder | None) -> None:
    return None


def _paths(
    state_dir: Path, kind: Hold, endpoints: Sequence[tuple[str, int]], root: Path | None
) -> tuple[Path, ...]:
    places = [Path(os.path.abspath(state_dir))]
    if endpoints:
        base = root if root is not None else lock_root()
        if root is None and not os.environ.get(LOCK_DIR_ENV, "").strip():
            _own_root(base)
        places += [endpoint_dir(base, machine, port) for machine, port in sorted(endpoints)]
    return tuple(place / file for place in places for file in _FILES[kind])


@contextlib.contextmanager
def hold(
    state_dir: Path,
    command: str,
    *,
    name: str,
    wait: bool = False,
    on_wait: Callable[[Holder | None], None] = _silent,
    kind: Hold = Hold.CHANGE,
    endpoints: Sequence[tuple[str, int]] = (),
    root: Path | None = None,
) -> Iterator[DeploymentLock]:
    """Hold the lock of the deployment whose state directory is ``state_dir`` and which owns
    ``endpoints`` (``(machine, port)`` pairs, their locks under ``root``, default
    :func:`lock_root`) for the block, as ``kind`` needs.

    Held by another process: :class:`~servelab.errors.DeploymentBusy` naming it (``name`` is the
    deployment's), or with ``wait``, ``on_wait(holder)`` once and a try of every file every
    :data:`POLL_S` until they are all free (nothing held meanwhile). ``command`` names this
    process in the files (``servelab restart``).
    """
    paths = _paths(state_dir, kind, endpoints, root)
    lock = _HELD.get(paths)
    if lock is not None:
        lock._depth += 1
    else:
        lock = _HELD[paths] = _acquire(paths, name, Holder.this_process(command), wait, on_wait)
    try:
        yield lock
    finally:
        lock.release()
