"""What a name in a spec may be: the deployment's, a service's and a host's. Each names a file or
a folder (the remote state folder ``.servelab/<deployment>``, a pid record
``run/<service>.json``, a log, ``backups/<service>/``), so each is one safe path segment (issue
38: a service named ``../../victim`` wrote its pid record over a file outside the state folder,
and ``down`` then deleted it)."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["SAFE_NAME", "SAFE_NAME_RULE", "unsafe_name"]

#: One safe path segment: never ``..``, ``/``, spaces, a line break or empty.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: What :data:`SAFE_NAME` asks, as the spec's check and ``init --name`` say it.
SAFE_NAME_RULE = ("must be 1-64 of A-Z a-z 0-9 . _ - starting with a letter or digit (it "
                  "names a folder: no '/', '..', spaces or empty name)")  # fmt: skip


def unsafe_name(names: Iterable[str]) -> str | None:
    """The first of ``names`` that is not :data:`SAFE_NAME`, or None."""
    return next((name for name in names if not SAFE_NAME.fullmatch(name)), None)
