"""The process serving a service, and the live values of named variables in its environment.

One lookup for every command (status, verify, knob, restart's adoption of a launcher's server):
the pid servelab recorded when it is still alive (for a shell start command: the port's owner in
the recorded process group), else the systemd unit's ``MainPID``, else the owner of the service's
port, which :func:`owner_of` tells as servelab's by the mark every process it launches
carries (:data:`~servelab.io.hosts.processes.SERVICE_MARK`), or, when its environment no longer
shows it (the real sglang-router writes its process title over its argv and environment), by its
stdout or stderr being this deployment's log file of the service. Every remote query shares one
timeout, :data:`QUERY_TIMEOUT_S`.

Only the names asked for leave :func:`read_live`: the rest of ``/proc/PID/environ`` (tokens,
passwords) is narrowed away inside it.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from servelab.core.deploy.mark import Mark
from servelab.core.engines import Engine
from servelab.core.knob import Knob
from servelab.core.knobs.argv import arg_values
from servelab.core.knobs.configfile import config_values
from servelab.core.knobs.configyaml import MAX_CONFIG_BYTES
from servelab.core.knobs.envfile import parse_environ, select
from servelab.core.knobs.places import LiveValue, live_value
from servelab.errors import CommandTimeout, HostError, KnobError
from servelab.io.hosts.host import Host
from servelab.io.hosts.ownrecord import others_places, read_own_record, same_deployment
from servelab.io.hosts.processes import (
    SERVICE_MARK,
    is_alive,
    proc_stat,
    service_log,
    spec_address,
    spec_mark,
)
from servelab.io.specfile import LoadedSpec

__all__ = [
    "QUERY_TIMEOUT_S",
    "Ownership",
    "ProcessRef",
    "daemon_reload",
    "find_process",
    "launched_here",
    "others_mark",
    "owner_of",
    "read_live",
    "read_live_args",
    "read_live_unless_blank",
    "service_logs",
    "unit_main_pid",
    "unit_needs_reload",
]

#: Seconds a query about a process (systemctl, /proc) may take on the service's host.
QUERY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ProcessRef:
    """The process serving a service: its pid (None: not found) and how it was found;
    ``unrecorded``: servelab launched it (it carries the mark) but holds no pid record of it;
    ``others``: the mark it carries when it is ANOTHER deployment's (:func:`others_mark`)."""

    pid: int | None
    source: str
    unrecorded: bool = False
    others: str | None = None


async def unit_main_pid(host: Host, unit: str) -> int | None:
    """The systemd unit's MainPID; None when systemd reports 0, fails, or does not answer."""
    try:
        result = await host.run(
            f"systemctl show -p MainPID --value {shlex.quote(unit)}", timeout=QUERY_TIMEOUT_S
        )
    except CommandTimeout:
        return None
    text = result.stdout.strip()
    return int(text) if result.ok and text.isascii() and text.isdigit() and int(text) > 0 else None


async def unit_needs_reload(host: Host, unit: str) -> bool | None:
    """systemd's ``NeedDaemonReload`` of the unit: its file changed on disk since systemd loaded
    it, so a restart would run the old unit (old ``ExecStart=`` arguments). None: not answered."""
    try:
        result = await host.run(
            f"systemctl show -p NeedDaemonReload --value {shlex.quote(unit)}",
            timeout=QUERY_TIMEOUT_S,
        )
    except CommandTimeout:
        return None
    text = result.stdout.strip()
    return {"yes": True, "no": False}.get(text) if result.ok else None


async def daemon_reload(host: Host) -> None:
    """``systemctl daemon-reload``: systemd reads every changed unit file again."""
    result = await host.run("systemctl daemon-reload", timeout=QUERY_TIMEOUT_S)
    if not result.ok:
        raise HostError(f"systemctl daemon-reload on {host.name}: {result.stderr.strip()}")


async def _from_record(loaded: LoadedSpec, service: str, host: Host) -> ProcessRef | None:
    record = (
        await read_own_record(host, loaded.state_dir, service, spec_mark(loaded, service))
    ).record
    if record is None or not await is_alive(host, record):
        return None
    if record.command is not None:  # a shell start command: the server is a child in its group
        owner = await host.listening_pid(loaded.spec.service(service).port)
        stat = await proc_stat(host, owner) if owner is not None else None
        if owner is not None and stat is not None and stat.pgid == record.pgid:
            return ProcessRef(owner, "port owner in the recorded process group")
    return ProcessRef(record.pid, "pid record")


async def find_process(loaded: LoadedSpec, service: str, host: Host) -> ProcessRef:
    """The pid servelab recorded (if alive), else the unit's MainPID, else the port's owner."""
    svc = loaded.spec.service(service)
    recorded = await _from_record(loaded, service, host)
    if recorded is not None:
        return recorded
    if svc.unit is not None:
        main_pid = await unit_main_pid(host, svc.unit)
        if main_pid is not None:
            return ProcessRef(main_pid, f"systemd unit {svc.unit}")
    owner = await host.listening_pid(svc.port)
    if owner is not None:
        logs = await service_logs(loaded, service, host)
        if await launched_here(host, owner, spec_mark(loaded, service), logs):
            return ProcessRef(owner, f"owner of port {svc.port}, launched by servelab", True)
        other = await others_mark(host, owner, spec_mark(loaded, service))
        return ProcessRef(owner, f"owner of port {svc.port}", others=other)
    return ProcessRef(None, "no pid record, unit or listener")


class Ownership(StrEnum):
    """Whose the process serving a service's port is, as far as it can be told."""

    #: This deployment's: its mark in the environment, or its stdout/stderr is the service's log.
    OURS = "ours"
    #: Not this deployment's: an environment without the mark (a stranger's), or another's mark.
    NOT_OURS = "not ours"
    #: Not told: its environment unreadable (another user's) or written over, its output elsewhere.
    UNKNOWN = "unknown"


async def service_logs(loaded: LoadedSpec, service: str, host: Host) -> tuple[str, ...]:
    """The log files this deployment launches ``service`` with on ``host``: the first place, and
    the one aside (:func:`~servelab.io.hosts.ownrecord.record_place`); a place whose record is
    another deployment's is left out (:func:`~servelab.io.hosts.ownrecord.others_places`: its
    log is that deployment's)."""
    state_dir = loaded.state_dir_on(host.is_local)
    at = spec_address(loaded.spec, service)
    mark = spec_mark(loaded, service)
    taken = await others_places(host, loaded.state_dir, service, mark)
    logs = [service_log(state_dir, service, p) for p in (None, at) if p not in taken]
    return tuple(log for log in logs if not host.is_local or _in_folder(log, state_dir))


def _in_folder(log: str, state_dir: str) -> bool:
    """Whether ``log`` is a file of the state folder itself, not reached through a link under it
    (a ``logs`` folder or a log linked elsewhere may be another state folder's too: writing to it
    proves nothing, the eighteenth pass, H1; the state folder itself may be reached by a link)."""
    inside = os.path.join(os.path.realpath(state_dir), os.path.relpath(log, state_dir))
    return os.path.realpath(log) == os.path.normpath(inside)


async def _writes_to(host: Host, pid: int, logs: Sequence[str]) -> bool:
    """Whether process ``pid``'s stdout or stderr is one of the regular files ``logs`` (the same
    file, by device and inode: a path that is a link to /dev/null proves nothing)."""
    found = await host.file_ids([f"/proc/{pid}/fd/1", f"/proc/{pid}/fd/2", *logs])
    outputs, ours = found[:2], {i for i in found[2:] if i is not None}
    return any(i is not None and i in ours for i in outputs)


async def owner_of(host: Host, pid: int, mark: str, logs: Sequence[str] = ()) -> Ownership:
    """Whose process ``pid`` is (:class:`Ownership`): the deployment of ``mark``
    (:func:`~servelab.io.hosts.processes.service_mark`) launched it, or something it launched
    started it, when its environment carries that mark or, when the environment shows no mark,
    its stdout or stderr is one of ``logs`` (the service's log files: :func:`service_logs`).
    Another deployment's mark is never this one's, whatever the process writes to."""
    try:
        environ: dict[str, str] | None = parse_environ(await host.read_environ(pid))
    except HostError:
        environ = None
    found = (environ or {}).get(SERVICE_MARK)
    if same_deployment(found, mark):
        return Ownership.OURS
    if found is not None:
        return Ownership.NOT_OURS
    if logs and await _writes_to(host, pid, logs):
        return Ownership.OURS
    return Ownership.NOT_OURS if environ else Ownership.UNKNOWN


async def others_mark(host: Host, pid: int, mark: str) -> str | None:
    """The mark process ``pid`` carries when it is ANOTHER deployment's (not ``mark``'s:
    :func:`~servelab.io.hosts.ownrecord.same_deployment`); None when it carries none (a
    stranger's, a value naming no deployment, or its environment unreadable or written over) or
    this deployment's. Only the mark leaves this function, never the rest of the environment."""
    try:
        found = select(parse_environ(await host.read_environ(pid)), [SERVICE_MARK])
    except HostError:
        return None
    other = found.get(SERVICE_MARK)
    if other is None or Mark.parse(other) is None:  # no deployment named: not a mark
        return None
    return None if same_deployment(other, mark) else other


async def launched_here(host: Host, pid: int, mark: str, logs: Sequence[str] = ()) -> bool:
    """Whether process ``pid`` is proven this deployment's (:func:`owner_of`): a process whose
    environment cannot be read (another user's) and that does not write to ``logs`` is not."""
    return await owner_of(host, pid, mark, logs) is Ownership.OURS


async def _cmdline(host: Host, pid: int) -> list[str]:
    """The process's own argv (``/proc/PID/cmdline``: NUL-separated words, as exec'd)."""
    raw = await host.read_file(f"/proc/{pid}/cmdline")
    return [word.decode("utf-8", "replace") for word in raw.split(b"\0")[:-1]]


async def read_live_args(
    host: Host,
    pid: int,
    knobs: Sequence[Knob],
    engine: Engine,
    *,
    config: str | None = None,
    flags: Collection[str] | None = None,
) -> dict[str, LiveValue]:
    """The live values of argument ``knobs`` only (``{knob name: LiveValue}``): the process's
    command line parsed as its engine parses it, its ``--config`` file (read through
    ``/proc/PID/cwd`` when relative) merged under it. ``config``: a copy of that file as the
    process read it, read instead of the file as it is now. The other words (an ``--api-key``)
    stay inside this function. A config file that cannot be read now counts as absent. With the
    parser's ``flags``, an abbreviated flag reads as the flag it stands for."""
    words = await _cmdline(host, pid)
    cmdline = arg_values(words, engine, flags)
    read = None
    path = cmdline.get("--config")
    if path is not None:
        where = config or (path if path.startswith("/") else f"/proc/{pid}/cwd/{path}")
        try:
            data = await host.read_file(where, limit=MAX_CONFIG_BYTES)
            read = config_values(data, engine, where, flags)
        except (HostError, KnobError):
            read = None
    return {knob.name: live_value(cmdline, read, knob, engine) for knob in knobs}


async def read_live(host: Host, pid: int, names: Iterable[str]) -> dict[str, str]:
    """The live values of ``names`` only; every other variable stays inside this function."""
    return select(parse_environ(await host.read_environ(pid)), list(names))


async def read_live_unless_blank(
    host: Host, pid: int, names: Iterable[str]
) -> dict[str, str] | None:
    """:func:`read_live`, or None when the process's environment reads blank (not one variable:
    a process that wrote over it, as sglang-router's title ``sglang::router`` does): nothing in
    it can be read back, which is not "unset"."""
    environ = parse_environ(await host.read_environ(pid))
    return select(environ, list(names)) if environ else None
