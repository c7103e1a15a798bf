"""A state folder's place in marks (issue 38, the seventeenth and eighteenth passes): a random id
kept in the folder (``<state_dir>/id``, 16 hex digits), made when servelab first launches a
service from it.

It moves with the folder: a deployment whose folder is renamed, or reached by another path, is
still itself (its processes stopped by ``down``, its answer references found by ``verify``). Two
state folders made apart hold two ids: two copies of one spec, each with its own state folder,
serving one port are two deployments. A folder copied whole with its id (``cp -r``, pid records
and all) is a clone of the deployment, as it always was.

A folder without an id (nothing launched from it yet), or whose ``id`` is not one (a link, a
FIFO, a large or foreign file: read without following, at most 64 bytes), has no place: its marks
name none, and a mark that names one is another deployment's.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from pathlib import Path

from servelab.errors import HostError
from servelab.io.files import write_atomic

__all__ = ["ID_FILE", "make_place", "read_place"]

#: The id's file in the state folder.
ID_FILE = "id"
_ID = re.compile(r"[0-9a-f]{16}")
_MAX_BYTES = 64


def read_place(state_dir: Path) -> str | None:
    """The state folder's id, or None (none yet, or its ``id`` is not one)."""
    path = state_dir / ID_FILE
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):  # a link, a FIFO, a device: no id
            return None
        with path.open("rb") as stream:
            raw = stream.read(_MAX_BYTES + 1)
    except OSError:
        return None
    text = raw.decode("ascii", "replace").strip()
    return text if len(raw) <= _MAX_BYTES and _ID.fullmatch(text) else None


def make_place(state_dir: Path) -> str | None:
    """The state folder's id, made now when it has none (:class:`~servelab.errors.HostError`
    when an ``id`` that is not one is in the way: it is named, never replaced); None when it
    cannot be written (a read-only or full state folder: marks then name no place, and what
    needs the folder writable says so itself)."""
    found = read_place(state_dir)
    if found is not None:
        return found
    path = state_dir / ID_FILE
    if os.path.lexists(path):
        raise HostError(
            f"{path} is not servelab's id of this state folder (16 hex digits in a regular "
            "file): remove it, and the next launch makes one"
        )
    made = secrets.token_hex(8)
    try:
        write_atomic(path, f"{made}\n".encode(), parents=True)
    except (OSError, HostError):
        return None
    return made
