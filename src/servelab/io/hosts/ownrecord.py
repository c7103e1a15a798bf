"""Whose a pid record is (issue 38): two specs whose state folders are the same folder (two spec
files beside each other, default ``state_dir``) write the same ``run/<service>.json``, so one
deployment can find the other's record of a service of the same name.

A record names the deployment that wrote it: its ``extra[MARK_KEY]`` holds the
:data:`~servelab.io.hosts.processes.SERVICE_MARK` value its process was launched with: the
deployment's name, the service and the service's host and port, so two specs that share a folder
AND a name (two copies of one spec on other ports) are told apart too. An older
record without it is known by the mark its live process carries in ``/proc/PID/environ``; when
neither tells (a dead or unreadable process), it is taken as this deployment's, as before.
:func:`read_own_record` is how every command reads a record it acts on: another deployment's is
never stopped, adopted or shown as this one's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from servelab.core.deploy.mark import Mark
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

__all__ = [
    "OwnRecord",
    "made_by",
    "named_deployment",
    "others_places",
    "read_own_record",
    "record_deployment",
    "record_place",
    "same_deployment",
]


@dataclass(frozen=True)
class OwnRecord:
    """The service's pid record when it is this deployment's (``record``; None: no record, or
    another's); ``other`` names the deployment whose record sits there instead, with its pid."""

    record: PidRecord | None
    other: str | None = None
    other_pid: int | None = None
    #: Where ``record`` was read: None, ``run/<service>.json``; else the address it was kept
    #: aside at (``run/<service>@<address>.json``) while another's held the first.
    at: str | None = None


def _parsed(mark: object) -> Mark | None:
    return Mark.parse(mark) if isinstance(mark, str) else None


def _deployment(mark: object) -> str | None:
    parsed = _parsed(mark)
    return None if parsed is None else parsed.name


def _mark_of(mark: object) -> str | None:
    return mark if isinstance(mark, str) and Mark.parse(mark) is not None else None


async def _record_mark(host: Host, record: PidRecord) -> str | None:
    """The mark ``record`` was written with, else its live process's (None: unknown)."""
    if MARK_KEY in record.extra:
        return _mark_of(record.extra[MARK_KEY])
    if not await is_alive(host, record):
        return None
    try:
        environ = await host.read_environ(record.pid)
    except HostError:
        return None
    return _mark_of(select(parse_environ(environ), [SERVICE_MARK]).get(SERVICE_MARK))


async def record_deployment(host: Host, record: PidRecord) -> str | None:
    """The deployment that wrote ``record``: its mark's, else its live process's (None: unknown)."""
    return _deployment(await _record_mark(host, record))


def same_deployment(found: str | None, mark: str) -> bool:
    """Whether mark ``found`` is ``mark``'s deployment: the same mark, or an older servelab's mark
    of the same deployment name: one without the state folder's place (same address), or one
    without the address either (same service)."""
    if found is None or found == mark:
        return found is not None
    theirs, ours = Mark.parse(found), Mark.parse(mark)
    if theirs is None or ours is None or theirs.name != ours.name or theirs.place is not None:
        return False
    if theirs.address is not None:  # an older mark: no state folder
        return theirs.served == ours.served
    # older still, no address: the same service (of a mark of ours that is one servelab writes:
    # a place without an address is no mark of ours, never an older one's deployment)
    return theirs.service == ours.service and (ours.address is not None or ours.place is None)


def made_by(recorded: str | None, ours: str | None) -> bool:
    """Whether a ledger row's deployment ``recorded`` is ``ours`` (issue 38): each a mark
    (:func:`~servelab.io.hosts.processes.spec_mark`), a name (a row written before marks were,
    schema 8) or None (a row written before either: anyone's). Two marks compare as
    :func:`same_deployment` (two specs of one name are two deployments); a name, by name."""
    if recorded is None or ours is None:
        return True
    if _mark_of(recorded) is not None and _mark_of(ours) is not None:
        return same_deployment(recorded, ours) or same_deployment(ours, recorded)
    return (_deployment(recorded) or recorded) == (_deployment(ours) or ours)


def named_deployment(found: str, mark: str) -> str:
    """How another deployment is named: its name, with its service's address when the name is
    this deployment's own too (two specs of one name), and "another state folder" when that
    address is this one's too."""
    name = _deployment(found) or found
    if name != _deployment(mark):
        return name
    address = _address(found)
    if address and address == _address(mark):  # one name, one address: another state folder
        return f"{name}@{address} (another state folder)"
    return f"{name}@{address}" if address else name


async def read_own_record(host: Host, state_dir: Path, service: str, mark: str) -> OwnRecord:
    """``service``'s pid record in ``state_dir`` if this deployment wrote it (its mark is ``mark``,
    :func:`~servelab.io.hosts.processes.spec_mark`), or who did is unknown; another deployment's
    record (another name, or the same name serving another address) is returned as ``other``,
    and then this deployment's own kept aside (:func:`record_place`), if any, as ``record``; a
    record kept aside at this deployment's address by another deployment is that one's."""
    record = read_pid_record(state_dir, service)
    other = OwnRecord(None)
    if record is not None:
        found = await _record_mark(host, record)
        if found is None or same_deployment(found, mark):
            return OwnRecord(record)
        other = OwnRecord(None, named_deployment(found, mark), record.pid)
    at = _address(mark)
    aside = None if at is None else read_pid_record(state_dir, service, at)
    if aside is None:
        return other
    # A record kept aside is keyed by the address alone: a third spec in the folder serving that
    # address under another name finds it there, and it is not that spec's (fifteenth pass, H1).
    found = await _record_mark(host, aside)
    if found is None or same_deployment(found, mark):
        return OwnRecord(aside, at=at)
    return (
        other
        if other.other is not None
        else OwnRecord(None, named_deployment(found, mark), aside.pid)
    )


async def others_places(host: Host, state_dir: Path, service: str, mark: str) -> set[str | None]:
    """The places of ``service``'s record (None: ``run/<service>.json``; an address: kept aside
    there) that hold another deployment's record: the log beside such a record is that
    deployment's, so writing to it proves nothing about ``mark``'s (a third spec in a shared
    folder serving another's address under another name: fifteenth pass, H1)."""
    taken: set[str | None] = set()
    for place in dict.fromkeys((None, _address(mark))):
        record = read_pid_record(state_dir, service, place)
        if record is None:
            continue
        found = await _record_mark(host, record)
        if found is not None and not same_deployment(found, mark):
            taken.add(place)
    return taken


def _address(mark: str) -> str | None:
    """The address a mark names (``<host>:<port>``; None: none, or empty)."""
    parsed = Mark.parse(mark)
    return (parsed.address or None) if parsed is not None else None


async def record_place(host: Host, state_dir: Path, service: str, mark: str) -> str | None:
    """Where this deployment writes ``service``'s pid record: None, ``run/<service>.json``;
    while another deployment's live record holds that (a shared state folder), aside under the
    service's address, so neither loses its record (a router that rewrites its environment
    cannot be told by its mark once its record is gone)."""
    record = read_pid_record(state_dir, service)
    if record is None:
        return None
    found = await _record_mark(host, record)
    if found is None or same_deployment(found, mark) or not await is_alive(host, record):
        return None
    return _address(mark)
