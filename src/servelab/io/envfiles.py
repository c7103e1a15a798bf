"""A service's env file and its timestamped backups, on the service's host (local or SSH).

The env file is what the service's next start uses; ``<path>.bak-<UTC stamp>`` files are the copies
:meth:`~servelab.io.hosts.Host.write_file_atomic` leaves before each change. Everything here goes
through the :class:`~servelab.io.hosts.Host`, so it reads the same over SSH as locally.

A file that does not parse raises :class:`~servelab.errors.KnobError` naming the file and line,
never the line itself (:func:`~servelab.core.knobs.parse_env_bytes`).
"""

from __future__ import annotations

import posixpath

from servelab.core.envfile import EnvFile
from servelab.core.knobs import backup_names, parse_env_bytes
from servelab.errors import HostError, KnobError
from servelab.io.hosts import Host

__all__ = [
    "BACKUP_SCAN",
    "latest_backup",
    "list_backups",
    "previous_version",
    "read_env_bytes",
    "read_env_file",
]

BACKUP_SCAN = 20  # backups read at most when looking for the previous version


async def read_env_bytes(host: Host, path: str) -> bytes | None:
    """The raw env file at ``path`` on ``host``; None when it does not exist."""
    try:
        return await host.read_file(path)
    except HostError:
        if not await host.exists(path):
            return None
        raise


async def read_env_file(host: Host, path: str) -> EnvFile | None:
    """The parsed env file at ``path`` on ``host``; None when it does not exist."""
    raw = await read_env_bytes(host, path)
    return None if raw is None else parse_env_bytes(raw, path)


async def list_backups(host: Host, path: str) -> list[str]:
    """Paths of the timestamped backups of ``path`` (``<path>.bak-<UTC stamp>``), newest first."""
    directory, base = posixpath.split(path)
    try:
        listing = await host.listdir(directory or ".")
    except HostError:
        return []
    return [posixpath.join(directory, name) for name in reversed(backup_names(listing, base))]


async def latest_backup(host: Host, path: str) -> str | None:
    """The newest timestamped backup of ``path``, if any."""
    names = await list_backups(host, path)
    return names[0] if names else None


async def previous_version(
    host: Host, path: str, current: bytes | None
) -> tuple[str, EnvFile | None] | None:
    """The newest backup whose content differs from ``current`` (the file before its last change).

    Backups identical to the file (a restart copies the env files aside) are skipped; when all of
    the newest few are identical, the newest is returned. The EnvFile is None if it does not parse.
    """
    chosen: tuple[str, bytes] | None = None
    for name in (await list_backups(host, path))[:BACKUP_SCAN]:
        try:
            data = await host.read_file(name)
        except HostError:
            continue
        chosen = chosen or (name, data)
        if data != current:
            chosen = (name, data)
            break
    if chosen is None:
        return None
    try:
        return chosen[0], parse_env_bytes(chosen[1], chosen[0])
    except KnobError:
        return chosen[0], None
