"""The one writer of every file servelab writes (docs, exports, A/B reports, traces, env and config
files, their backups, pid records); ``tests/test_architecture.py`` fails on any other write.

Where a path leads, it is written there and only there (:func:`write_atomic`):

- a symbolic link to a regular file, a folder or nothing is never written through: it is
  refused, naming the path, link and target untouched (:func:`~.overwrite.link_refusal`: a link
  planted in an export's folder, ``DIR/requests.jsonl -> /etc/passwd``); so is a link among the
  folders :func:`write_files` writes. A deployment's env and config files (an operator may link
  them on purpose) are written through their link (``follow_links=True``); a link to a device
  or a FIFO is as what it leads to; ``/dev/stdout``, ``/dev/fd/N`` use that descriptor;
- a regular file (or a new one) is written whole or not at all: the bytes go to a temporary file in
  the same directory, are flushed to disk (``fsync``), and the temporary file is renamed over the
  target, so a reader (or a crash) never sees half a file. An existing file keeps its permission
  bits, its owner and its group (``root:daemon 0640`` stays so); when the owner or group cannot be
  given to the new file (another user's file), the write is refused, the file untouched; so is a
  file this user could not open for writing (a read-only ``0444`` file, not root), as ``open`` does;
- anything else that exists (a FIFO, a character device such as ``/dev/null`` or ``/dev/full``,
  ``/dev/fd/N`` of a shell's process substitution) is opened and streamed into, never renamed
  over; a directory and a block device (a disk, a loop device: it holds something) are refused;
- a missing parent directory is an error naming the path, unless the caller documents creating it
  (``parents=True``: the state directory, an ``--export`` or ``--out`` directory).

A file's bytes are given whole (``bytes``) or as an iterable of chunks written as they come, so a
document larger than memory streams through; no ``write()`` call is handed more than
``chunk_bytes`` (1 MiB by default: Linux transfers at most 2,147,479,552 bytes in one call), and
every call's count is checked. A failed or short write (``/dev/full``: no space left) raises
:class:`~servelab.errors.HostError` (files are touched on the local host), removes the temporary
file and leaves the target as it was. :func:`write_stream` writes to an open descriptor (standard
output) with the same checks; a closed pipe is an error there too.

A file on an SSH host is written by :data:`REMOTE_WRITE_SCRIPT` (the same rules in POSIX shell;
:class:`~servelab.io.hosts.ssh.SSHHost` runs it)."""

from __future__ import annotations

import contextlib
import errno
import filecmp
import os
import stat
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType

from servelab.errors import HostError
from servelab.io import overwrite
from servelab.io.overwrite import descriptor, existing, linked_folder, unwritten, write_refusal

__all__ = [
    "CHUNK_BYTES",
    "REMOTE_WRITE_SCRIPT",
    "AtomicFile",
    "Data",
    "check_directory",
    "write_atomic",
    "write_files",
    "write_if_changed",
    "write_stream",
    "write_to",
]

#: The most bytes handed to one ``write()`` call.
CHUNK_BYTES = 1 << 20

#: A file's content: its bytes, or chunks of them in order.
Data = bytes | Iterable[bytes]


def _chunks(data: Data) -> Iterable[bytes]:
    return (data,) if isinstance(data, bytes) else data


class _Sink:
    """Checked, buffered writes to one descriptor (``name`` is what error messages call it)."""

    def __init__(self, fd: int, name: str, chunk_bytes: int) -> None:
        if chunk_bytes < 1:
            raise ValueError(f"chunk_bytes must be positive, not {chunk_bytes}")
        self._fd = fd
        self._name = name
        self._chunk = chunk_bytes
        self._buffer = bytearray()
        self.written = 0

    def write(self, data: bytes) -> None:
        self._buffer += data
        if len(self._buffer) >= self._chunk:
            self._drain(whole=False)

    def flush(self) -> None:
        self._drain(whole=True)

    def _drain(self, *, whole: bool) -> None:
        data = memoryview(bytes(self._buffer))  # immutable: slices of it outlive no resize
        self._buffer.clear()
        done, least = 0, 1 if whole else self._chunk
        while len(data) - done >= least:
            done += self._write_once(data[done : done + self._chunk])
        self._buffer += data[done:]

    def _write_once(self, piece: memoryview) -> int:
        try:
            count = os.write(self._fd, piece)
        except OSError as exc:
            why = "the reader closed the pipe" if exc.errno == errno.EPIPE else exc.strerror
            raise HostError(
                f"write to {self._name} failed after {self.written} bytes: {why or exc}"
            ) from exc
        if count <= 0:
            raise HostError(f"short write to {self._name}: 0 bytes taken after {self.written}")
        self.written += count
        return count


class AtomicFile:
    """One file being written: :meth:`write` chunks, then :meth:`commit` renames it into place;
    :meth:`discard` (or leaving a ``with`` block by an exception) removes what was written.

    ``unless_same``: :meth:`commit` leaves the target untouched (and returns False) when it
    already holds exactly these bytes.
    """

    def __init__(
        self,
        path: Path,
        *,
        mode: int | None = None,
        chunk_bytes: int = CHUNK_BYTES,
        unless_same: bool = False,
        parents: bool = False,
    ) -> None:
        self.path = Path(path)
        self._unless_same = unless_same
        self._tmp: Path | None = None
        try:
            _parent_ready(self.path, parents)
            kept = existing(self.path)
            _check_writable(self.path, kept)
            # in the folder the system resolves: LINK/../sub is in the link target's parent
            folder, stem = os.path.realpath(self.path.parent), f".{self.path.name}."
            fd, name = tempfile.mkstemp(prefix=stem, suffix=overwrite.PARTIAL, dir=folder)
            self._tmp = Path(name)
            _keep_attributes(fd, self.path, kept, mode)
        except HostError:
            self.discard()
            raise
        except OSError as exc:
            self.discard()
            raise HostError(unwritten(self.path, exc)) from exc
        self._fd = fd
        self._sink = _Sink(fd, str(self.path), chunk_bytes)

    @property
    def written(self) -> int:
        """Bytes written to disk so far."""
        return self._sink.written

    def write(self, data: bytes) -> None:
        try:
            self._sink.write(data)
        except HostError:
            self.discard()
            raise

    def commit(self) -> bool:
        """Flush, fsync, rename over the target, fsync the directory; False when unchanged."""
        try:
            self._sink.flush()
            os.fsync(self._fd)
            self._close()
            assert self._tmp is not None
            if self._unless_same and _same(self._tmp, self.path):
                self.discard()
                return False
            os.replace(self._tmp, self.path)
            self._tmp = None
            _fsync_directory(self.path.parent)
            return True
        except HostError:
            self.discard()
            raise
        except OSError as exc:
            self.discard()
            raise HostError(f"cannot write {self.path}: {exc.strerror or exc}") from exc

    def discard(self) -> None:
        """Remove the temporary file (nothing reaches the target)."""
        self._close()
        tmp, self._tmp = self._tmp, None
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)

    def _close(self) -> None:
        fd, self._fd = getattr(self, "_fd", -1), -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()


def _same(a: Path, b: Path) -> bool:
    return b.is_file() and a.stat().st_size == b.stat().st_size and filecmp.cmp(a, b, False)


def _parent_ready(path: Path, parents: bool) -> None:
    """Make the parent directory (``parents``) or prove it is there: a :class:`HostError`
    naming the path when it is missing."""
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    elif not path.parent.is_dir():
        raise HostError(f"cannot write {path}: no directory {path.parent} (create it first)")


def _check_writable(path: Path, kept: os.stat_result | None) -> None:
    """Refuse to replace a file this user could not open for writing (a read-only ``0444`` file
    of a non-root user), as ``open`` would: renaming over it needs only the directory's rights."""
    effective = os.access in os.supports_effective_ids
    if kept is not None and not os.access(path, os.W_OK, effective_ids=effective):
        raise HostError(f"cannot write {path}: Permission denied (the file is read-only)")


def _keep_attributes(fd: int, path: Path, kept: os.stat_result | None, mode: int | None) -> None:
    """Give the temporary file the mode asked for (else the replaced file's, else 0o644) and the
    replaced file's owner and group."""
    os.fchmod(fd, mode if mode is not None else (kept.st_mode & 0o7777 if kept else 0o644))
    if kept is None or (kept.st_uid, kept.st_gid) == (os.geteuid(), os.getegid()):
        return
    try:
        os.fchown(fd, kept.st_uid, kept.st_gid)
    except PermissionError:
        raise HostError(
            f"cannot write {path}: its owner and group ({kept.st_uid}:{kept.st_gid}) cannot be "
            "kept by this user: write it as its owner (or root)"
        ) from None
    if mode is None:
        os.fchmod(fd, kept.st_mode & 0o7777)  # chown clears set-id bits


def write_atomic(
    path: Path,
    data: Data,
    *,
    mode: int | None = None,
    parents: bool = False,
    chunk_bytes: int = CHUNK_BYTES,
    follow_links: bool = False,
) -> int:
    """Write ``data`` where ``path`` leads (see the module doc); the number of bytes written.

    ``mode``: a regular file's permission bits (default: the replaced file's, else 0o644);
    ``parents``: create missing parent directories (else they are an error naming the path);
    ``follow_links``: write a link's target (a deployment's file), else refuse the link."""
    fd = descriptor(path)
    if fd is not None:
        return write_stream(fd, data, name=str(path), chunk_bytes=chunk_bytes)
    target, st = _destination(path, follow_links)
    if st is not None and not stat.S_ISREG(st.st_mode):
        return _stream_into(path, data, chunk_bytes)
    with AtomicFile(target, mode=mode, chunk_bytes=chunk_bytes, parents=parents) as out:
        for chunk in _chunks(data):
            out.write(chunk)
    return out.written


def _destination(path: Path, follow_links: bool = False) -> tuple[Path, os.stat_result | None]:
    """Where ``path`` leads (its link's end with ``follow_links``, else itself: a link to a
    regular file refused), and what is there (None: nothing yet)."""
    if (refused := write_refusal(path, follow_links)) is not None:
        raise HostError(refused)
    try:
        st = os.stat(path)  # follows links: what the path names in the end
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise HostError(f"cannot write {path}: {exc.strerror or exc}") from exc
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise HostError(f"cannot write {path}: it is a directory")
    return (Path(os.path.realpath(path)) if follow_links else Path(path)), st


#: How long a FIFO is waited on for a reader before the write gives up (it never blocks unbounded:
#: a blocked ``open`` let no stop signal through).
FIFO_READER_WAIT_S = 30.0


def _stream_into(path: Path, data: Data, chunk_bytes: int) -> int:
    try:
        fd = _open_fifo(path) if stat.S_ISFIFO(os.stat(path).st_mode) else None
        if fd is None:
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except HostError:  # already says so (no reader came): an OSError too, not wrapped twice
        raise
    except OSError as exc:
        raise HostError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):  # a link swapped in since: never written through
            raise HostError(f"cannot write {path}: it became a regular file; nothing written")
        return write_stream(fd, data, name=str(path), chunk_bytes=chunk_bytes)
    finally:
        os.close(fd)


def _open_fifo(path: Path) -> int:
    """The FIFO opened for writing once a reader has it open, polled without blocking (so a
    signal's handler runs between tries) for :data:`FIFO_READER_WAIT_S` at most."""
    deadline = time.monotonic() + FIFO_READER_WAIT_S
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
            if time.monotonic() > deadline:
                raise HostError(
                    f"cannot write {path}: no reader opened the FIFO in {FIFO_READER_WAIT_S:g} s"
                ) from exc
            time.sleep(0.05)
            continue
        os.set_blocking(fd, True)
        return fd


def write_stream(
    fd: int, data: Data, *, name: str = "standard output", chunk_bytes: int = CHUNK_BYTES
) -> int:
    """Write ``data`` to the open descriptor ``fd``, every call checked; the bytes written.

    A failure (a full disk, a pipe whose reader went away) raises :class:`HostError` saying how
    many bytes got out: what the reader holds is partial.
    """
    sink = _Sink(fd, name, chunk_bytes)
    for chunk in _chunks(data):
        sink.write(chunk)
    sink.flush()
    return sink.written


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_if_changed(path: Path, data: Data, *, parents: bool = False) -> bool:
    """Write ``path`` (as :func:`write_atomic`) unless it already holds ``data``; True when it
    was written."""
    target, st = _destination(path)
    if st is not None and not stat.S_ISREG(st.st_mode):
        _stream_into(path, data, CHUNK_BYTES)
        return True
    if isinstance(data, bytes):
        try:
            if st is not None and target.read_bytes() == data:
                return False
        except OSError as exc:
            raise HostError(f"cannot read {path}: {exc.strerror or exc}") from exc
        write_atomic(target, data, parents=parents)
        return True
    out = AtomicFile(target, unless_same=True, parents=parents)
    try:
        for chunk in data:
            out.write(chunk)
    except BaseException:
        out.discard()
        raise
    return out.commit()


def write_files(out_dir: Path, files: Mapping[str, Data]) -> tuple[list[str], list[str]]:
    """Write each ``relative path -> bytes`` (or chunks) under ``out_dir`` whose bytes changed;
    ``out_dir`` and the folders under it are created (the commands that write a set of files
    say so).

    Returns ``(written, unchanged)`` relative paths, sorted.
    """
    written: list[str] = []
    unchanged: list[str] = []
    for rel, data in sorted(files.items()):
        if (refused := linked_folder(out_dir, rel)) is not None:
            raise HostError(refused)
        changed = write_if_changed(out_dir / rel, data, parents=True)
        (written if changed else unchanged).append(rel)
    return written, unchanged


def check_directory(directory: Path) -> None:
    """Make ``directory`` (and its parents) and prove a file can be written in it, before the
    work whose files go there (a bench's ``--export``): a :class:`HostError` naming it if not
    (an existing file there: "it is not a directory")."""
    if directory.exists() and not directory.is_dir():
        raise HostError(f"cannot write {directory}: it is not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".servelab-probe-", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise HostError(f"cannot write {directory}: {exc.strerror or exc}") from exc


def write_to(path: Path, data: Data, *, chunk_bytes: int = CHUNK_BYTES) -> int:
    """Write ``data`` where a user names (an export's ``-o PATH``): :func:`write_atomic` with no
    directory created; the number of bytes written."""
    return write_atomic(path, data, chunk_bytes=chunk_bytes)


#: The remote half of the writer, run by ``sh -c`` on an SSH host with the bytes on its standard
#: input; ``{path}`` and ``{backup}`` (empty: none) are shell-quoted. The same rules: a link
#: followed, a block device refused, another non-regular file streamed into, no directory an
#: error, a regular file replaced through a synced temporary file taking its mode, owner, group.
REMOTE_WRITE_SCRIPT = """set -e
p={path}; b={backup}
if [ -L "$p" ]; then p=$(readlink -f -- "$p"); fi
if [ -d "$p" ]; then echo "$p: it is a directory" >&2; exit 1; fi
if [ -b "$p" ]; then echo "$p: it is a block device (servelab writes none)" >&2; exit 1; fi
if [ -e "$p" ] && [ ! -f "$p" ]; then cat > "$p"; exit 0; fi
if [ -e "$p" ] && [ ! -w "$p" ]; then echo "$p: Permission denied (read-only)" >&2; exit 1; fi
d=$(dirname -- "$p")
if [ ! -d "$d" ]; then echo "no directory $d (create it first)" >&2; exit 1; fi
t=$(mktemp "$d/.servelab.XXXXXX")
trap 'rm -f -- "$t"' EXIT
cat > "$t"
sync -- "$t" 2>/dev/null || sync
if [ -e "$p" ]; then
  chown --reference="$p" -- "$t"; chmod --reference="$p" -- "$t"
else chmod 600 -- "$t"; fi
if [ -e "$p" ] && [ -n "$b" ]; then cp -p -- "$p" "$b"; echo "$b"; fi
mv -f -- "$t" "$p"
trap - EXIT
sync -- "$d" 2>/dev/null || true
"""
