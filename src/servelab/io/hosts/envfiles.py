"""A service's env file and its timestamped backups, on the service's host (local or SSH).

The env file is what the service's next start uses. Before each change a copy of it is kept as
``<backup_dir>/<name>-<path digest>/<name>.bak-<UTC stamp>``, where the backup directory is
``<state_dir>/backups/<service>`` on the service's host (:func:`backup_dir`; over SSH the remote
state directory), never beside the file: the env file may be tracked (``examples/env/``), and
nothing but its own content may change there. Only the newest :data:`BACKUP_KEEP` backups of a file
are kept; older ones are removed after each new one. A restart's ``.pre-restart-`` copies live
there too (:func:`save_copy`), pruned the same way.

One folder per file, named by its path and holding an ``origin`` file with the path: two
deployments sharing a state folder (issue 38 H5) never see, nor restore, each other's backups, and a
backup is only ever read for the file it is a copy of. Backups an older servelab kept straight in
``backups/<service>/`` (whose file is unknown) are no longer read.

Older servelab kept its backups beside the file (``<path>.bak-<stamp>``): they are still read
(merged with the state directory's, newest first), never pruned or removed.

Everything here goes through the :class:`~servelab.io.hosts.host.Host`, so it reads the same over
SSH as locally. A file that does not parse raises :class:`~servelab.errors.KnobError` naming the
file and line, never the line itself (:func:`~servelab.core.knobs.rules.parse_env_bytes`).
"""

from __future__ import annotations

import hashlib
import posixpath

from servelab.core.knobs.configyaml import MAX_CONFIG_BYTES, too_large
from servelab.core.knobs.envfile import EnvFile
from servelab.core.knobs.rules import backup_names, parse_env_bytes
from servelab.errors import HostError, KnobError, UnreadFileError
from servelab.io.hosts.host import Host, backup_name

__all__ = [
    "BACKUP_KEEP",
    "BACKUP_SCAN",
    "MAX_FILE_BYTES",
    "ORIGIN",
    "backup_dir",
    "config_field",
    "env_field",
    "file_backup_dir",
    "latest_backup",
    "list_backups",
    "previous_version",
    "prune_copies",
    "read_config_bytes",
    "read_env_bytes",
    "read_env_file",
    "save_copy",
    "unread_refusal",
    "write_env_file",
]

#: The largest env or config file read (a larger one, a FIFO or a device is refused unread).
MAX_FILE_BYTES = 1 << 20
BACKUP_KEEP = 20  # backups (and pre-restart copies) kept per env file; older ones are removed
BACKUP_SCAN = 20  # backups read at most when looking for the previous version


def backup_dir(state_dir: str, service: str) -> str:
    """Where the service's env-file backups live: ``<state_dir>/backups/<service>``; each file's
    in its own folder there (:func:`file_backup_dir`)."""
    return posixpath.join(state_dir, "backups", service)


def file_backup_dir(directory: str, path: str) -> str:
    """The folder of ``path``'s backups under ``directory`` (a service's :func:`backup_dir`):
    ``<base name>-<12 hex of the path's SHA-256>``. Two deployments sharing a state folder (two
    ``decode.env`` in two folders, issue 38 H5) never share one; its :data:`ORIGIN` file names
    the path, checked before any backup of it is read."""
    digest = hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return posixpath.join(directory, f"{posixpath.basename(path)}-{digest}")


#: The file in each :func:`file_backup_dir` naming the path its backups are copies of.
ORIGIN = "origin"


async def _own_folder(host: Host, directory: str, path: str, *, make: bool) -> str | None:
    """``path``'s backup folder under ``directory`` when its :data:`ORIGIN` is ``path`` (made,
    with ``make``, when it is missing); None when it names another file."""
    folder = file_backup_dir(directory, path)
    origin = posixpath.join(folder, ORIGIN)
    try:
        named = await host.read_file(origin, limit=MAX_FILE_BYTES)
    except HostError:
        if await host.exists(origin):
            return None
        if make:
            await host.makedirs(folder)
            await host.write_file_atomic(
                origin, path.encode("utf-8", "surrogateescape"), backup=False
            )
        return folder
    return folder if named == path.encode("utf-8", "surrogateescape") else None


async def read_config_bytes(host: Host, path: str, *, field: str | None = None) -> bytes | None:
    """The raw config file (a service's ``config_file``) at ``path`` on ``host``, at most
    :data:`~servelab.core.knobs.configyaml.MAX_CONFIG_BYTES` (the one bound of its parser: a
    larger file is bad input, :func:`~servelab.core.knobs.configyaml.too_large`); None when it
    does not exist. With ``field`` (the spec's, ``services.decode.config_file``), a FIFO or a
    device is bad input too, never read (:func:`unread_refusal`)."""
    try:
        return await host.read_file(path, limit=MAX_CONFIG_BYTES)
    except HostError as exc:
        if not await host.exists(path):
            return None
        if f"larger than {MAX_CONFIG_BYTES} bytes" in str(exc):
            raise too_large(path) from exc
        refused = None if field is None else unread_refusal(exc, path, field)
        if refused is not None:
            raise refused from exc
        raise


def env_field(service: str) -> str:
    """The spec's field naming ``service``'s env file, as a refusal names it."""
    return f"services.{service}.env_file"


def config_field(service: str) -> str:
    """The spec's field naming ``service``'s config file, as a refusal names it."""
    return f"services.{service}.config_file"


def unread_refusal(exc: HostError, path: str, field: str) -> UnreadFileError | None:
    """A service's env or config file refused unread by :meth:`Host.read_file` (an env file over
    :data:`MAX_FILE_BYTES`, a FIFO, a device: locally and over SSH alike) as bad input (exit 2)
    naming the spec's ``field`` and the file; None for any other failure (a host unreachable, a
    permission)."""
    said = str(exc)
    if said.endswith(f"larger than {MAX_FILE_BYTES} bytes"):
        why = f"larger than {MAX_FILE_BYTES:,} bytes, the most an env file is read up to"
    elif said.endswith("not a regular file"):
        why = "not a regular file (a FIFO, a device or a directory), never read"
    else:
        return None
    return UnreadFileError(f"{path} ({field}): {why}")


async def read_env_bytes(host: Host, path: str, *, field: str | None = None) -> bytes | None:
    """The raw env (or config) file at ``path`` on ``host``, at most :data:`MAX_FILE_BYTES`;
    None when it does not exist. With ``field`` (the spec's, ``services.decode.env_file``), one
    too large or not a regular file is an :class:`UnreadFileError` naming it and the file (exit
    2)."""
    try:
        return await host.read_file(path, limit=MAX_FILE_BYTES)
    except HostError as exc:
        if not await host.exists(path):
            return None
        refused = None if field is None else unread_refusal(exc, path, field)
        if refused is not None:
            raise refused from exc
        raise


async def read_env_file(host: Host, path: str, *, field: str | None = None) -> EnvFile | None:
    """The parsed env file at ``path`` on ``host`` (``field``: :func:`read_env_bytes`); None when
    it does not exist."""
    raw = await read_env_bytes(host, path, field=field)
    return None if raw is None else parse_env_bytes(raw, path)


async def save_copy(
    host: Host, path: str, directory: str, *, kind: str = "bak", field: str | None = None
) -> str | None:
    """Copy the file at ``path`` to ``<its folder>/<name>.<kind>-<UTC stamp>`` (owner-only; its
    folder: :func:`file_backup_dir` under ``directory``), then prune that kind's copies to the
    newest :data:`BACKUP_KEEP`; None when there is no file (``field``: :func:`read_env_bytes`)."""
    current = await read_env_bytes(host, path, field=field)
    if current is None:
        return None
    folder = await _own_folder(host, directory, path, make=True)
    if folder is None:
        raise HostError(f"{file_backup_dir(directory, path)}: holds the backups of another file")
    directory = folder
    stamped = posixpath.basename(backup_name(path))
    copy = posixpath.join(directory, stamped.replace(".bak-", f".{kind}-", 1))
    await host.write_file_atomic(copy, current, backup=False)
    await prune_copies(host, directory, posixpath.basename(path), kind=kind)
    return copy


async def prune_copies(
    host: Host, directory: str, base: str, *, kind: str = "bak", keep: int = BACKUP_KEEP
) -> list[str]:
    """Remove all but the newest ``keep`` copies of ``base`` of ``kind`` in ``directory``."""
    names = backup_names(await _listing(host, directory), base, kind)
    gone = [posixpath.join(directory, name) for name in names[: max(len(names) - keep, 0)]]
    for path in gone:
        await host.remove(path)
    return gone


async def write_env_file(
    host: Host, path: str, data: bytes, *, backup_dir: str | None
) -> str | None:
    """Replace the env file atomically; first, with ``backup_dir``, back the old file up there.

    Returns the backup's path (None: no backup asked for, or no file to back up).
    """
    backup = None if backup_dir is None else await save_copy(host, path, backup_dir)
    await host.write_file_atomic(path, data, backup=False)
    return backup


async def _listing(host: Host, directory: str) -> list[str]:
    try:
        return await host.listdir(directory or ".")
    except HostError:
        return []


async def list_backups(host: Host, path: str, backup_dir: str | None) -> list[str]:
    """Paths of the backups of ``path``, newest first: those in its folder under ``backup_dir``
    (:func:`file_backup_dir`, when its origin is ``path``) and, from older servelab, those beside
    the file (``<path>.bak-<UTC stamp>``)."""
    directory, base = posixpath.split(path)
    own = None if backup_dir is None else await _own_folder(host, backup_dir, path, make=False)
    places = dict.fromkeys(p for p in (own, directory or ".") if p is not None)
    found = [
        posixpath.join(place, name)
        for place in places
        for name in backup_names(await _listing(host, place), base)
    ]
    return sorted(found, key=posixpath.basename, reverse=True)


async def latest_backup(host: Host, path: str, backup_dir: str | None) -> str | None:
    """The newest timestamped backup of ``path``, if any."""
    names = await list_backups(host, path, backup_dir)
    return names[0] if names else None


async def previous_version(
    host: Host, path: str, current: bytes | None, backup_dir: str | None
) -> tuple[str, EnvFile | None] | None:
    """The newest backup whose content differs from ``current`` (the file before its last change).

    Backups identical to the file are skipped; when all of the newest few are identical, the
    newest is returned. The EnvFile is None if it does not parse.
    """
    chosen: tuple[str, bytes] | None = None
    for name in (await list_backups(host, path, backup_dir))[:BACKUP_SCAN]:
        try:
            data = await host.read_file(name, limit=MAX_FILE_BYTES)
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
