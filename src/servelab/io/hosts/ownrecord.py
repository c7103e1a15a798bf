"""Whose a pid record is (issue 38): two specs whose state folders are the same folder (two spec
files beside each other, default ``state_dir``) write the same ``run/<service>.json``, so one
deployment can find the other's record of a service of the same name.

A record names the deployment that wrote it: its ``extra[MARK_KEY]`` holds the
:data:`~servelab.io.hosts.processes.SERVICE_MARK` value its process was launched with. An older
record without it is known by the mark its live process carries in ``/proc/PID/environ``; when
neither tells (a dead or unreadable process), it is taken as this deployment's, as before.
:func:`read_own_record` is how every command reads a record it acts on: another deployment's is
never stopped, adopted or shown as this one's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from servelab.core.knobs.envfile import parse_environ, select
from servelab.errors import HostError
from servelab.io.hosts.host import Host
from servelab.io.hosts.processes import (
    MARK_KEY,
    SERVICE_MARK,
    PidRecord,
    is_alive,
    read_pid_record,
)

__all__ = ["OwnRecord", "read_own_record", "record_deployment"]


@dataclass(frozen=True)
class OwnRecord:
    """The service's pid record when it is this deployment's (``record``; None: no record, or
    another's); ``other`` names the deployment whose record sits there instead, with its pid."""

    record: PidRecord | None
    other: str | None = None
    other_pid: int | None = None


def _deployment(mark: object) -> str | None:
    return (mark.rpartition("/")[0] or None) if isinstance(mark, str) else None


async def record_deployment(host: Host, record: PidRecord) -> str | None:
    """The deployment that wrote ``record``: its mark, else its live process's (None: unknown)."""
    if MARK_KEY in record.extra:
        return _deployment(record.extra[MARK_KEY])
    if not await is_alive(host, record):
        return None
    try:
        environ = await host.read_environ(record.pid)
    except HostError:
        return None
    return _deployment(select(parse_environ(environ), [SERVICE_MARK]).get(SERVICE_MARK))


async def read_own_record(host: Host, state_dir: Path, service: str, deployment: str) -> OwnRecord:
    """``service``'s pid record in ``state_dir`` if the deployment named ``deployment`` wrote it
    (or who did is unknown); another deployment's record is returned as ``other`` only."""
    record = read_pid_record(state_dir, service)
    if record is None:
        return OwnRecord(None)
    owner = await record_deployment(host, record)
    if owner is None or owner == deployment:
        return OwnRecord(record)
    return OwnRecord(None, owner, record.pid)
