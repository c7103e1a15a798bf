"""Knob operations: get, set, diff a service's declared env variable, and read knobs live.

A knob is an environment variable a service reads at start-up, declared in the spec under
``knobs``. Its value lives in three places: the env file (what the next start uses), the latest
backup of that file (what it was before the last change) and the running process's environment
(``/proc/PID/environ``: what is live now). Editing the file changes nothing live until a restart.

Only declared knobs and the names on :data:`~servelab.core.knobs.rules.ENV_ALLOW_LIST` are ever read
into results (:func:`~servelab.core.knobs.rules.check_knob_name`); reading the file, its backups and
the process lives in :mod:`servelab.io.hosts.envfiles` and :mod:`servelab.io.hosts.discovery`.

``set_knob`` writes the env file atomically (temp file, fsync, rename) after a timestamped backup,
through the service's :class:`~servelab.io.hosts.host.Host`, so it works the same over SSH. Every
operation takes an :class:`~servelab.ops.context.Operation` (its hosts are reused) or a bare spec.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from servelab.core.knobs.envfile import parse_envfile
from servelab.core.knobs.rules import LiveVerdict, check_knob_name, live_verdict, parse_env_bytes
from servelab.errors import CaseError, HostError, KnobError
from servelab.io.hosts.discovery import find_process, read_live
from servelab.io.hosts.envfiles import previous_version, read_env_bytes, read_env_file
from servelab.io.ledger.ledger import Ledger
from servelab.ops.context import Operation, SpecOrOperation, operation

__all__ = [
    "KnobChange",
    "KnobDiff",
    "diff_knob",
    "get_knob",
    "live_knob",
    "live_knobs",
    "set_knob",
]


# -- results -----------------------------------------------------------------------------------


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
    def verdict(self) -> LiveVerdict | None:
        """File vs live; None when the service is not running."""
        return live_verdict(self.file, self.live) if self.running else None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "running": self.running, "verdict": self.verdict}


# -- reading ----------------------------------------------------------------------------------


def _env_path(op: Operation, service: str) -> str:
    path = op.env_path(service)
    if path is None:
        raise KnobError(f"service {service!r} has no env_file in the spec")
    return path


async def live_knobs(target: SpecOrOperation) -> dict[str, str | None]:
    """Every declared knob of every running service, live, as ``{"service/NAME": value}``.

    What a measurement ran with (soaks record it, so a case can tell whether a soak failed with a
    knob and passed without it). A service that is not running is left out.
    """
    out: dict[str, str | None] = {}
    async with operation(target) as op:
        for name, svc in op.spec.services.items():
            if not svc.knobs:
                continue
            host = op.host(name)
            proc = await find_process(op.loaded, name, host)
            if proc.pid is None:
                continue
            live = await read_live(host, proc.pid, svc.knobs)
            out.update({f"{name}/{knob}": live.get(knob) for knob in svc.knobs})
    return out


async def live_knob(target: SpecOrOperation, service: str, name: str) -> str | None:
    """The knob's value in the running process's environment now (None: unset or not running)."""
    check_knob_name(target.spec, service, name)
    async with operation(target) as op:
        host = op.host(service)
        proc = await find_process(op.loaded, service, host)
        if proc.pid is None:
            return None
        return (await read_live(host, proc.pid, [name])).get(name)


# -- the three operations ----------------------------------------------------------------------


async def get_knob(target: SpecOrOperation, service: str, name: str) -> str | None:
    """The knob's value in the service's env file (None: not set)."""
    check_knob_name(target.spec, service, name)
    async with operation(target) as op:
        env = await read_env_file(op.host(service), _env_path(op, service))
    return None if env is None else env.get(name)


async def diff_knob(target: SpecOrOperation, service: str, name: str) -> KnobDiff:
    """The knob's value in the env file, its latest backup, and the running process."""
    svc = check_knob_name(target.spec, service, name)
    async with operation(target) as op:
        path = _env_path(op, service)
        host = op.host(service)
        raw = await read_env_bytes(host, path)
        env = None if raw is None else parse_env_bytes(raw, path)
        previous = await previous_version(host, path, raw, op.backup_dir(service))
        backup_path, backup = previous if previous is not None else (None, None)
        proc = await find_process(op.loaded, service, host)
        live = await read_live(host, proc.pid, [name]) if proc.pid is not None else {}
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
    op: Operation, service: str, name: str
) -> tuple[int | None, str | None, str | None]:
    """(pid, live value, error): a failure to look is reported, not raised."""
    host = op.host(service)
    try:
        proc = await find_process(op.loaded, service, host)
        if proc.pid is None:
            return None, None, None
        return proc.pid, (await read_live(host, proc.pid, [name])).get(name), None
    except HostError as exc:
        return None, None, f"{type(exc).__name__}: {exc}"


async def set_knob(
    target: SpecOrOperation,
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
    (in ``ledger``, else the operation's) right after the write. ``restart_needed`` is true when
    the service runs with another value (or its live value could not be read: ``live_error``).
    """
    svc = check_knob_name(target.spec, service, name)
    _check_value(name, value)
    async with operation(target, ledger=ledger) as op:
        if case_id is not None and op.ledger is not None and op.ledger.get_case(case_id) is None:
            raise CaseError(f"unknown case {case_id}: open one with `servelab case open TITLE`")
        path = _env_path(op, service)
        env = await read_env_file(op.host(service), path)
        old = None if env is None else env.get(name)
        backup_path: str | None = None
        change_id = None
        if old != value:
            base = env if env is not None else parse_envfile("", source=path)
            new_env = base.set(name, value) if value is not None else base.unset(name)
            data = new_env.render().encode()
            backup_path = await op.write_env(service, path, data, backup=env is not None)
            change_id = _record_change(op, service, name, old, value, reason, case_id, backup_path)
        pid, live, live_error = await _live_value(op, service, name)
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


def _record_change(
    op: Operation,
    service: str,
    name: str,
    old: str | None,
    new: str | None,
    reason: str | None,
    case_id: int | None,
    backup_path: str | None,
) -> int | None:
    """Record the change in the operation's ledger (None: no ledger)."""
    if op.ledger is None:
        return None
    return op.ledger.record_knob_change(
        service=service, name=name, old=old, new=new, reason=reason, case_id=case_id,
        backup_path=backup_path,
    )  # fmt: skip


def _check_value(name: str, value: str | None) -> None:
    if value is not None and ("\n" in value or "\r" in value or "\0" in value):
        raise KnobError(f"{name}: a value cannot contain a newline or NUL")
