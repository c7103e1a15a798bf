"""The one writer of every file a command writes (docs, exports, A/B reports, default env files).

Each file is written whole or not at all: the bytes go to a temporary file in the same directory,
are flushed to disk (``fsync``), and the temporary file is renamed over the target, so a reader (or
a crash) never sees half a file. The directory is created when missing. A failed or short write
raises :class:`~servelab.errors.HostError` (files are touched on the local host) and leaves the
target as it was.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from servelab.errors import HostError

__all__ = ["write_atomic", "write_files", "write_if_changed"]


def _write_all(fd: int, data: bytes, path: Path) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise HostError(f"short write to {path}: {len(data) - len(view)} of {len(data)} bytes")
        view = view[written:]
    os.fsync(fd)


def _discard(tmp: Path | None) -> None:
    if tmp is None:  # never created (its directory could not be made)
        return
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` through a temp file in the same directory, fsync, rename, and
    fsync the directory. ``mode``: the file's permission bits (default: the replaced file's,
    else 0o644)."""
    tmp: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if mode is None:
            mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        tmp = Path(name)
        try:
            os.fchmod(fd, mode)
            _write_all(fd, data, path)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        _fsync_directory(path.parent)
    except OSError as exc:
        _discard(tmp)
        raise HostError(f"cannot write {path}: {exc.strerror or exc}") from exc
    except HostError:
        _discard(tmp)
        raise


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_if_changed(path: Path, data: bytes) -> bool:
    """Write ``path`` atomically unless it already holds ``data``; True when it was written."""
    try:
        if path.is_file() and path.read_bytes() == data:
            return False
    except OSError as exc:
        raise HostError(f"cannot read {path}: {exc.strerror or exc}") from exc
    write_atomic(path, data)
    return True


def write_files(out_dir: Path, files: Mapping[str, bytes]) -> tuple[list[str], list[str]]:
    """Write each ``relative path -> bytes`` under ``out_dir`` whose bytes changed.

    Returns ``(written, unchanged)`` relative paths, sorted.
    """
    written: list[str] = []
    unchanged: list[str] = []
    for rel, data in sorted(files.items()):
        (written if write_if_changed(out_dir / rel, data) else unchanged).append(rel)
    return written, unchanged
