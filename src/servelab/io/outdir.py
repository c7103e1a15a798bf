"""A directory of generated pages (``report --out DIR``, ``investigate --out DIR``): what may be
replaced in it, and the record of what servelab wrote there.

The ``--force`` rule of every writer of a user's file (:mod:`servelab.io.overwrite`), for a set
of files: a file the pages would replace is kept, exit 2 naming it, unless ``--force``, when it
holds anything, holds other bytes than the new page, and is not what servelab last wrote there.
What servelab wrote is recorded in :data:`MANIFEST` (each file's SHA-256), so regenerating the
pages into their own directory (the default ``report/`` next to the ledger) needs no ``--force``,
while a file put there by anyone else (``perf-plan.md`` of one's own notes), or a page edited since,
is kept. A symbolic link among the files or their folders (``DIR/index.html -> /tmp/victim``) is
never written through, ``--force`` or not: refused, before any file is written.
"""

from __future__ import annotations

import hashlib
import json
import stat
from collections.abc import Mapping
from pathlib import Path

from servelab.errors import HostError, OptionError
from servelab.io.files import write_files, write_if_changed
from servelab.io.overwrite import existing

__all__ = ["MANIFEST", "check_out_dir", "write_out_dir"]

#: The record of the files servelab wrote in the directory, ``{"files": {path: sha256}}``.
MANIFEST = ".servelab-written.json"

#: At most this many paths named in a refusal (then how many more).
_NAMED = 8


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _written_before(out_dir: Path) -> dict[str, str] | None:
    """The recorded ``{path: sha256}``; ``{}`` when there is no record, None when the file there
    is not one (someone else's file of that name: replaced only with ``--force``)."""
    path = out_dir / MANIFEST
    if path.is_symlink():
        return None
    found = existing(path)
    if found is None or (stat.S_ISREG(found.st_mode) and not found.st_size):
        return {}
    try:
        doc = json.loads(path.read_bytes()) if found.st_size <= 16 << 20 else None
    except (OSError, ValueError):
        return None
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        return None
    return {str(k): v for k, v in files.items()}


def _linked(out_dir: Path, rel: str) -> Path | None:
    """The symbolic link on the way to ``out_dir/rel`` (its folders under ``out_dir``, the file
    itself), None when there is none: ``out_dir`` itself is the user's to name."""
    path = out_dir
    for part in Path(rel).parts:
        path = path / part
        if path.is_symlink():
            return path
    return None


def _replaced(path: Path, data: bytes, recorded: str | None) -> bool:
    """Whether writing ``data`` at ``path`` destroys something servelab did not write there."""
    found = existing(path)
    if found is None or not stat.S_ISREG(found.st_mode) or not found.st_size:
        return False
    if found.st_size == len(data) or recorded is not None:
        try:
            held = path.read_bytes()
        except OSError:
            return True
        return held != data and _digest(held) != recorded
    return True


def _a_directory(out_dir: Path) -> None:
    """A :class:`~servelab.errors.HostError` (exit 1, one line) when ``out_dir``, or the nearest
    of its parents that exists, is not a directory: nothing can be written there."""
    for path in (out_dir, *out_dir.parents):
        if path.exists() or path.is_symlink():
            if not path.is_dir():
                where = "it" if path == out_dir else str(path)
                raise HostError(f"cannot write {out_dir}: {where} is not a directory")
            return


def _named(paths: list[Path]) -> str:
    shown = ", ".join(str(p) for p in paths[:_NAMED])
    more = len(paths) - _NAMED
    return shown + (f" and {more} more" if more > 0 else "")


def check_out_dir(
    out_dir: Path, files: Mapping[str, bytes], force: bool, option: str = "--force"
) -> None:
    """Refuse (:class:`~servelab.errors.OptionError`, exit 2, nothing written) a link among
    ``files``' paths under ``out_dir``, ``option`` or not, and, without ``option``, a file there
    the pages would replace (see the module doc); both named."""
    _a_directory(out_dir)
    links = [p for rel in sorted({*files, MANIFEST}) if (p := _linked(out_dir, rel)) is not None]
    if links:
        raise OptionError(
            f"cannot write {out_dir}: {_named(sorted(set(links)))}: a symbolic link, and servelab "
            "writes no file through a link (--force or not): remove the link, or give another "
            "directory"
        )
    if force:
        return
    before = _written_before(out_dir)
    taken = [
        out_dir / rel
        for rel, data in sorted(files.items())
        if _replaced(out_dir / rel, data, (before or {}).get(rel))
    ]
    if before is None:
        taken.append(out_dir / MANIFEST)
    if taken:
        raise OptionError(
            f"{_named(taken)} exist(s), not written by servelab's last pages there: give "
            f"{option} to overwrite, or another directory"
        )


def write_out_dir(
    out_dir: Path, files: Mapping[str, bytes], force: bool
) -> tuple[list[str], list[str]]:
    """:func:`check_out_dir`, then the files written (only those whose bytes changed) and
    recorded in :data:`MANIFEST`; ``(written, unchanged)`` relative paths, sorted."""
    check_out_dir(out_dir, files, force)
    written, unchanged = write_files(out_dir, files)
    recorded = {**(_written_before(out_dir) or {}), **{r: _digest(d) for r, d in files.items()}}
    doc = json.dumps({"files": dict(sorted(recorded.items()))}, indent=1) + "\n"
    write_if_changed(out_dir / MANIFEST, doc.encode(), parents=True)
    return written, unchanged
