"""Whether a writer may replace what is at a path: the one rule every writer of a user's file
follows (``--force``), and the unused name a report written at the end of a long run takes."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from servelab.errors import HostError, OptionError

__all__ = ["check_overwrite", "existing", "unused_stem"]


def existing(path: Path) -> os.stat_result | None:
    """The file's status (a link's target's), None when there is none."""
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def check_overwrite(path: Path, force: bool, option: str = "--force") -> None:
    """The one rule of every writer of a user's file: an existing regular file (a link's target)
    that holds anything is overwritten only with ``option`` (:class:`~servelab.errors.OptionError`,
    exit 2, the file untouched); an empty one destroys nothing, and a FIFO or a device is
    streamed into, never "overwritten"."""
    found = existing(path)
    if found is not None and stat.S_ISREG(found.st_mode) and found.st_size and not force:
        raise OptionError(f"{path} exists: give {option} to overwrite it, or another path")


def unused_stem(directory: Path, stem: str, suffixes: Iterable[str]) -> str:
    """``stem``, or ``stem-2``, ``stem-3``... the first for which no file ``directory/STEM+S`` of
    ``suffixes`` holds anything: a report written at the end of a long run (``ab-run.md`` of a
    run without a ledger) never replaces an earlier one, and never fails for it either."""
    for n in range(1, 10_000):
        name = stem if n == 1 else f"{stem}-{n}"
        taken = (existing(directory / f"{name}{suffix}") for suffix in suffixes)
        if not any(f is not None and stat.S_ISREG(f.st_mode) and f.st_size for f in taken):
            return name
    raise HostError(f"cannot write {directory}/{stem}*: 10,000 earlier ones are there")
