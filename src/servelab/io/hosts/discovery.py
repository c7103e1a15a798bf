"""The process serving a service, and the live values of named variables in its environment.

One lookup for every command (status, verify, knob, restart's adoption of a launcher's server):
the pid servelab recorded when it is still alive (for a shell start command: the port's owner in
the recorded process group), else the systemd unit's ``MainPID``, else the owner of the service's
port, which :func:`launched_here` tells as servelab's by the mark every process it launches
carries (:data:`~servelab.io.hosts.processes.SERVICE_MARK`). Every remote query shares one
timeout, :data:`QUERY_TIMEOUT_S`.

Only the names asked for leave :func:`read_live`: the rest of ``/proc/PID/environ`` (tokens,
passwords) is narrowed away inside it.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from servelab.core.engines import Engine
from servelab.core.knob import Knob
from servelab.core.knobs.argv import arg_values
from servelab.core.knobs.configfile import config_values
from servelab.core.knobs.configyaml import MAX_CONFIG_BYTES
from servelab.core.knobs.envfile import parse_environ, select
from servelab.core.knobs.places import LiveValue, live_value
from servelab.errors import CommandTimeout, HostError, KnobError
from servelab.io.hosts.host import Host
from servelab.io.hosts.ownrecord import read_own_record, same_deployment
from servelab.io.hosts.processes import (
    SERVICE_MARK,
    is_alive,
    proc_stat,
    spec_mark,
)
from servelab.io.specfile import LoadedSpec

__all__ = [
    "QUERY_TIMEOUT_S",
    "ProcessRef",
    "daemon_reload",
    "find_process",
    "launched_here",
    "read_live",
    "read_live_args",
    "unit_main_pid",
    "unit_needs_reload",
]

#: Seconds a query about a process (systemctl, /proc) may take on the service's host.
QUERY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ProcessRef:
    """The process serving a service: its pid (None: not found) and how it was found;
    ``unrecorded``: servelab launched it (it carries the mark) but holds no pid record of it."""

    pid: int | None
    source: str
    unrecorded: bool = False


async def unit_main_pid(host: Host, unit: str) -> int | None:
    """The systemd unit's MainPID; None when systemd reports 0, fails, or does not answer."""
    try:
        result = await host.run(
            f"systemctl show -p MainPID --value {shlex.quote(unit)}", timeout=QUERY_TIMEOUT_S
        )
    except CommandTimeout:
        return None
    text = result.stdout.strip()
    return int(text) if result.ok and text.isdigit() and int(text) > 0 else None


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
        await read_own_record(host, loaded.state_dir, service, spec_mark(loaded.spec, service))
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
        if await launched_here(host, owner, spec_mark(loaded.spec, service)):
            return ProcessRef(owner, f"owner of port {svc.port}, launched by servelab", True)
        return ProcessRef(owner, f"owner of port {svc.port}")
    return ProcessRef(None, "no pid record, unit or listener")


async def launched_here(host: Host, pid: int, mark: str) -> bool:
    """Whether process ``pid`` carries ``mark`` (:func:`~servelab.io.hosts.processes.service_mark`)
    in its environment: servelab launched it, or something servelab launched started it. A
    process whose environment cannot be read (another user's) is not servelab's."""
    try:
        environ = await host.read_environ(pid)
    except HostError:
        return False
    return same_deployment(select(parse_environ(environ), [SERVICE_MARK]).get(SERVICE_MARK), mark)


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
