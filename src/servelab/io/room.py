"""The room on a disk: how many bytes this user may still write there, and the pre-flight of a
command that writes its files only at the end of a long run (``bench --find-capacity --export``):
a full disk lets an empty file be made (which :func:`~servelab.io.files.check_directory`
proves), then fails the first bytes written, after the run."""

from __future__ import annotations

import os
from pathlib import Path

from servelab.errors import HostError

__all__ = ["check_room", "free_bytes"]


def free_bytes(path: Path) -> int | None:
    """The bytes free for this user on the disk of ``path`` (or of its nearest existing parent);
    None when that cannot be read."""
    here = path
    while not here.exists() and here != here.parent:
        here = here.parent
    try:
        info = os.statvfs(here)
    except OSError:
        return None
    return info.f_bavail * info.f_frsize


def check_room(directory: Path, need: int) -> None:
    """``directory``'s disk has ``need`` bytes free for this user, before the work whose files
    go there: a :class:`~servelab.errors.HostError` saying how much is free if not."""
    free = free_bytes(directory)
    if free is not None and free < need:
        raise HostError(f"cannot write {directory}: its disk is full: {free // 1024:,} KiB free, "
                        f"under the {-(-need // 1024):,} KiB its files need")  # fmt: skip
