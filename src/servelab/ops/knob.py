"""Knobs: a service's declared env variables in its env file, the file's backup, and live.

A knob is an environment variable a service reads at start-up, declared in the spec under
``knobs``. Its value lives in three places: the env file (what the next start uses), the latest
backup of that file (what it was before the last change) and the running process's environment
(``/proc/PID/environ``: what is live now). Editing the file changes nothing live until a restart.

Only declared knobs and the names on :data:`ENV_ALLOW_LIST` are ever read into results: a process
environment is narrowed with :func:`~servelab.core.envfile.select` inside the function that read
it, so the values of other variables (tokens, passwords) never leave that function.

``set_knob`` writes the env file atomically (temp file, fsync, rename) after a timestamped backup,
through the service's :class:`~servelab.io.hosts.Host`, so it works the same over SSH.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import re
import shlex
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from servelab.core.envfile import EnvFile, parse_envfile, parse_environ, select
from servelab.core.spec import ServiceSpec
from servelab.errors import CaseError, HostError, KnobError
from servelab.io.hosts import Host, host_for
from servelab.io.processes import is_alive, proc_stat, read_pid_record
from servelab.io.specfile import LoadedSpec
from servelab.io.store import Ledger

__all__ = [
    "ENV_ALLOW_LIST",
    "LIVE_DIFFERS",
    "LIVE_LOST_ON_RESTART",
    "LIVE_MATCH",
    "LIVE_RESTART_NEEDED",
    "LIVE_UNSET",
    "HostPool",
    "KnobChange",
    "KnobDiff",
    "ProcessRef",
    "backup_names",
    "check_knob_name",
    "diff_knob",
    "find_process",
    "get_knob",
    "latest_backup",
    "live_knobs",
    "live_verdict",
    "previous_version",
    "read_env_bytes",
    "read_env_file",
    "read_env_text",
    "read_live",
    "set_knob",
    "tracked_names",
]

#: Variables whose values are safe to show besides the declared knobs (settings, not secrets).
#: They are compared file-vs-live only when the env file sets them.
ENV_ALLOW_LIST: tuple[str, ...] = (
    "SERVELAB_SIM_TIME_SCALE",
    "SERVELAB_SIM_WARMUP_S",
    "SERVELAB_SIM_SEED",
    "SERVELAB_SIM_SLOW_START_S",
    "SERVELAB_SIM_TRANSFER_FAIL_PROB",
    "SERVELAB_SIM_ABORT_WEDGE",
    "SERVELAB_SIM_CORRUPT_UNDER_LOAD",
    "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT",
    "SGLANG_DISAGGREGATION_WAITING_TIMEOUT",
    "CUDA_VISIBLE_DEVICES",
)

# Verdicts of a file-vs-live comparison (rules return these codes; wording is in report/verify).
LIVE_MATCH = "match"
LIVE_UNSET = "unset"
LIVE_RESTART_NEEDED = "restart_needed"
LIVE_LOST_ON_RESTART = "lost_on_restart"
LIVE_DIFFERS = "differs"

_CMD_TIMEOUT_S = 10.0
_BACKUP_SCAN = 20  # backups read at most when looking for the previous version


# -- pure rules --------------------------------------------------------------------------------


def tracked_names(
    svc: ServiceSpec, file_names: Iterable[str], allow: Iterable[str] = ENV_ALLOW_LIST
) -> list[str]:
    """The names whose values may be read: declared knobs, then allow-listed names in the file."""
    in_file = set(file_names)
    extra = sorted(n for n in set(allow) if n in in_file and n not in svc.knobs)
    return [*svc.knobs, *extra]


def check_knob_name(loaded: LoadedSpec, service: str, name: str) -> ServiceSpec:
    """The service's spec if ``name`` is a declared knob of it (or allow-listed), else KnobError."""
    svc = loaded.spec.service(service)
    if name in svc.knobs or name in ENV_ALLOW_LIST:
        return svc
    declared = ", ".join(svc.knobs) or "none"
    raise KnobError(
        f"{name!r} is not a declared knob of {service!r} (declared: {declared}); "
        f"declare it under services.{service}.knobs in the spec"
    )


def live_verdict(file: str | None, live: str | None) -> str:
    """Compare a knob's env-file value with its live value (one of the ``LIVE_*`` codes)."""
    if file == live:
        return LIVE_UNSET if file is None else LIVE_MATCH
    if live is None:
        return LIVE_RESTART_NEEDED
    if file is None:
        return LIVE_LOST_ON_RESTART
    return LIVE_DIFFERS


# -- results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessRef:
    """The process serving a service: its pid (None: not found) and how it was found."""

    pid: int | None
    source: str


@dataclass(frozen=True)
class KnobChange:
    """What ``set_knob`` did. ``restart_needed``: the service runs with another value."""

    service: str
    name: str
    old: str | None
    new: str | None
    changed: bool
    backup_path: str | None
    env_file: str
    restart_needed: bool
    running: bool
    live: str | None
    spec_value: str | None
    change_id: int | None
    live_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class KnobDiff:
    """A knob's value in the env file, in the file's latest backup, and live (None: unset)."""

    service: str
    name: str
    file: str | None
    backup: str | None
    live: str | None
    spec_value: str | None
    backup_path: str | None
    env_file: str
    pid: int | None
    pid_source: str

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def verdict(self) -> str | None:
        """File vs live (a ``LIVE_*`` code); None when the service is not running."""
        return live_verdict(self.file, self.live) if self.running else None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "running": self.running, "verdict": self.verdict}


# -- hosts -------------------------------------------------------------------------------------


class HostPool:
    """One :class:`Host` per host name of the spec, opened on first use, closed together."""

    def __init__(self, loaded: LoadedSpec) -> None:
        self._loaded = loaded
        self._hosts: dict[str, Host] = {}
        self._urls: dict[str, str] = {}
        self._url_lock = asyncio.Lock()

    def for_service(self, service: str) -> Host:
        name = self._loaded.spec.service(service).host
        if name not in self._hosts:
            self._hosts[name] = host_for(name, self._loaded.spec.hosts[name])
        return self._hosts[name]

    async def url(self, service: str) -> str:
        """The service's URL as reachable from here (over SSH: one port forward), cached."""
        async with self._url_lock:
            if service not in self._urls:
                url = self._loaded.spec.service(service).url
                self._urls[service] = await self.for_service(service).http_url(url)
            return self._urls[service]

    async def aclose(self) -> None:
        self._urls = {}
        hosts, self._hosts = list(self._hosts.values()), {}
        for host in hosts:
            await host.aclose()


# -- reading -----------------------------------------------------------------------------------


def _env_path(loaded: LoadedSpec, service: str) -> str:
    path = loaded.env_file(service)
    if path is None:
        raise KnobError(f"service {service!r} has no env_file in the spec")
    return str(path)


async def _missing(host: Host, path: str) -> bool:
    if host.is_local:
        return not os.path.exists(path)
    result = await host.run(f"test -e {shlex.quote(path)}", timeout=_CMD_TIMEOUT_S)
    return result.exit_status != 0


def read_env_text(raw: bytes, path: str) -> EnvFile:
    """Parse an env file; a parse error names the file and line but never echoes the line."""
    try:
        return parse_envfile(raw.decode("utf-8", "replace"), source=path)
    except KnobError as exc:
        where = re.match(r"(.*?:\d+): ", str(exc))
        place = where.group(1) if where else path
        raise KnobError(f"{place}: not a NAME=VALUE line (its content is not shown)") from None


async def read_env_bytes(host: Host, path: str) -> bytes | None:
    """The raw env file at ``path`` on ``host``; None when it does not exist."""
    try:
        return await host.read_file(path)
    except HostError:
        if await _missing(host, path):
            return None
        raise


async def read_env_file(host: Host, path: str) -> EnvFile | None:
    """The parsed env file at ``path`` on ``host``; None when it does not exist."""
    raw = await read_env_bytes(host, path)
    return None if raw is None else read_env_text(raw, path)


def backup_names(listing: Iterable[str], base: str) -> list[str]:
    """The names in ``listing`` that are timestamped backups of ``base``, oldest first."""
    pattern = re.compile(re.escape(base) + r"\.bak-\d{8}T\d{6}(\.\d+)?Z\Z")
    return sorted(name for name in listing if pattern.match(name))


async def _backups(host: Host, path: str) -> list[str]:
    """Paths of the timestamped backups of ``path`` (``<path>.bak-<UTC stamp>``), newest first."""
    directory, base = posixpath.split(path)
    if host.is_local:
        try:
            listing = os.listdir(directory or ".")
        except OSError:
            return []
    else:
        cmd = f"ls -1a -- {shlex.quote(directory or '.')}"
        result = await host.run(cmd, timeout=_CMD_TIMEOUT_S)
        if result.exit_status != 0:
            return []
        listing = result.stdout.splitlines()
    return [posixpath.join(directory, name) for name in reversed(backup_names(listing, base))]


async def latest_backup(host: Host, path: str) -> str | None:
    """The newest timestamped backup of ``path``, if any."""
    names = await _backups(host, path)
    return names[0] if names else None


async def previous_version(
    host: Host, path: str, current: bytes | None
) -> tuple[str, EnvFile | None] | None:
    """The newest backup whose content differs from ``current`` (the file before its last change).

    Backups identical to the file (a restart copies the env files aside) are skipped; when all of
    the newest few are identical, the newest is returned. The EnvFile is None if it does not parse.
    """
    names = await _backups(host, path)
    chosen: tuple[str, bytes] | None = None
    for name in names[:_BACKUP_SCAN]:
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
        return chosen[0], read_env_text(chosen[1], chosen[0])
    except KnobError:
        return chosen[0], None


async def _pid_from_record(loaded: LoadedSpec, service: str, host: Host) -> ProcessRef | None:
    record = read_pid_record(loaded.state_dir, service)
    if record is None or not await is_alive(host, record):
        return None
    if record.command is not None:  # a shell start command: the server is a child in its group
        owner = await host.listening_pid(loaded.spec.service(service).port)
        stat = await proc_stat(host, owner) if owner is not None else None
        if owner is not None and stat is not None and stat.pgid == record.pgid:
            return ProcessRef(owner, "port owner in the recorded process group")
    return ProcessRef(record.pid, "pid record")


async def _pid_from_unit(unit: str, host: Host) -> int | None:
    result = await host.run(
        f"systemctl show -p MainPID --value {shlex.quote(unit)}", timeout=_CMD_TIMEOUT_S
    )
    text = result.stdout.strip()
    return int(text) if result.exit_status == 0 and text.isdigit() and int(text) > 0 else None


async def find_process(loaded: LoadedSpec, service: str, host: Host) -> ProcessRef:
    """The pid servelab recorded (if alive), else the unit's MainPID, else the port's owner."""
    svc = loaded.spec.service(service)
    recorded = await _pid_from_record(loaded, service, host)
    if recorded is not None:
        return recorded
    if svc.unit is not None:
        main_pid = await _pid_from_unit(svc.unit, host)
        if main_pid is not None:
            return ProcessRef(main_pid, f"systemd unit {svc.unit}")
    owner = await host.listening_pid(svc.port)
    if owner is not None:
        return ProcessRef(owner, f"owner of port {svc.port}")
    return ProcessRef(None, "no pid record, unit or listener")


async def read_live(host: Host, pid: int, names: Iterable[str]) -> dict[str, str]:
    """The live values of ``names`` only; every other variable stays inside this function."""
    return select(parse_environ(await host.read_environ(pid)), list(names))


async def live_knobs(loaded: LoadedSpec) -> dict[str, str | None]:
    """Every declared knob of every running service, live, as ``{"service/NAME": value}``.

    What a measurement ran with (soaks record it, so a case can tell whether a soak failed with a
    knob and passed without it). A service that is not running is left out.
    """
    out: dict[str, str | None] = {}
    pool = HostPool(loaded)
    try:
        for name, svc in loaded.spec.services.items():
            if not svc.knobs:
                continue
            host = pool.for_service(name)
            proc = await find_process(loaded, name, host)
            if proc.pid is None:
                continue
            live = await read_live(host, proc.pid, svc.knobs)
            out.update({f"{name}/{knob}": live.get(knob) for knob in svc.knobs})
    finally:
        await pool.aclose()
    return out


# -- the three operations ----------------------------------------------------------------------


async def get_knob(loaded: LoadedSpec, service: str, name: str) -> str | None:
    """The knob's value in the service's env file (None: not set)."""
    check_knob_name(loaded, service, name)
    pool = HostPool(loaded)
    try:
        env = await read_env_file(pool.for_service(service), _env_path(loaded, service))
    finally:
        await pool.aclose()
    return None if env is None else env.get(name)


async def diff_knob(loaded: LoadedSpec, service: str, name: str) -> KnobDiff:
    """The knob's value in the env file, its latest backup, and the running process."""
    svc = check_knob_name(loaded, service, name)
    path = _env_path(loaded, service)
    pool = HostPool(loaded)
    try:
        host = pool.for_service(service)
        raw = await read_env_bytes(host, path)
        env = None if raw is None else read_env_text(raw, path)
        previous = await previous_version(host, path, raw)
        backup_path, backup = previous if previous is not None else (None, None)
        proc = await find_process(loaded, service, host)
        live = await read_live(host, proc.pid, [name]) if proc.pid is not None else {}
    finally:
        await pool.aclose()
    return KnobDiff(
        service=service,
        name=name,
        file=None if env is None else env.get(name),
        backup=None if backup is None else backup.get(name),
        live=live.get(name),
        spec_value=svc.knobs.get(name),
        backup_path=backup_path,
        env_file=path,
        pid=proc.pid,
        pid_source=proc.source,
    )


async def _live_value(
    loaded: LoadedSpec, service: str, name: str, host: Host
) -> tuple[int | None, str | None, str | None]:
    """(pid, live value, error): a failure to look is reported, not raised."""
    try:
        proc = await find_process(loaded, service, host)
        if proc.pid is None:
            return None, None, None
        return proc.pid, (await read_live(host, proc.pid, [name])).get(name), None
    except HostError as exc:
        return None, None, f"{type(exc).__name__}: {exc}"


async def set_knob(
    loaded: LoadedSpec,
    service: str,
    name: str,
    value: str | None,
    *,
    reason: str | None = None,
    case_id: int | None = None,
    ledger: Ledger | None = None,
) -> KnobChange:
    """Set (``value=None``: remove) a knob in the env file: backup, atomic write, record.

    Nothing is written or recorded when the file already holds ``value``. The change is recorded
    right after the write. ``restart_needed`` is true when the service runs with another value
    (or its live value could not be read: ``live_error``).
    """
    svc = check_knob_name(loaded, service, name)
    _check_value(name, value)
    if case_id is not None and ledger is not None and ledger.get_case(case_id) is None:
        raise CaseError(f"unknown case {case_id}: open one with `servelab case open TITLE`")
    path = _env_path(loaded, service)
    pool = HostPool(loaded)
    change_id = None
    try:
        host = pool.for_service(service)
        env = await read_env_file(host, path)
        old = None if env is None else env.get(name)
        backup_path: str | None = None
        if old != value:
            base = env if env is not None else parse_envfile("", source=path)
            new_env = base.set(name, value) if value is not None else base.unset(name)
            data = new_env.render().encode()
            backup_path = await host.write_file_atomic(path, data, backup=env is not None)
            if ledger is not None:
                change_id = ledger.record_knob_change(
                    service=service, name=name, old=old, new=value, reason=reason,
                    case_id=case_id, backup_path=backup_path,
                )  # fmt: skip
        pid, live, live_error = await _live_value(loaded, service, name, host)
    finally:
        await pool.aclose()
    return KnobChange(
        service=service,
        name=name,
        old=old,
        new=value,
        changed=old != value,
        backup_path=backup_path,
        env_file=path,
        restart_needed=(pid is not None and live != value) or live_error is not None,
        running=pid is not None,
        live=live,
        spec_value=svc.knobs.get(name),
        change_id=change_id,
        live_error=live_error,
    )


def _check_value(name: str, value: str | None) -> None:
    if value is not None and ("\n" in value or "\r" in value or "\0" in value):
        raise KnobError(f"{name}: a value cannot contain a newline or NUL")
