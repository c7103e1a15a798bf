"""Which of the deployment's files are one file: each service's ``env_file`` and ``config_file``
looked at on its host (``stat -L``: device and inode, links followed), so two services whose
files are links to one file (a symlink, a hard link) are seen sharing it, as two services naming
one path are. The pure rule (:func:`servelab.core.deploy.topology.file_sharers`, and so
``restart``'s plan, ``knob set``'s readers of a file) takes what this reads.

A file that cannot be looked at (missing, not a regular file, its host unreachable) is known by
its path alone, as before.
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Hashable

from servelab.core.deploy.topology import FileIdentities
from servelab.errors import ServelabError
from servelab.ops.context import Operation

__all__ = ["file_identities"]


async def file_identities(op: Operation) -> FileIdentities:
    """Each file a service of the spec reads, by ``(host, path as written, normalised)``: its
    identity on that host (one command per host)."""
    wanted: dict[str, dict[tuple[str, str], str]] = {}  # host name -> key -> path to look at
    first: dict[str, str] = {}  # host name -> a service on it (its session)
    for name, svc in op.spec.services.items():
        for path in (svc.env_file, svc.config_file):
            if path:
                key = (svc.host, posixpath.normpath(path))
                wanted.setdefault(svc.host, {})[key] = str(op.loaded.path(path))
                first.setdefault(svc.host, name)
    found: dict[tuple[str, str], Hashable] = {}
    for host, files in wanted.items():
        keys = list(files)
        with contextlib.suppress(ServelabError, OSError):  # unreachable: by path, as before
            ids = await op.host(first[host]).file_ids([files[key] for key in keys])
            found.update({key: ident for key, ident in zip(keys, ids, strict=True) if ident})
    return found
