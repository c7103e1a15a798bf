"""Knob operations: get, set, diff a service's declared knob, and read knobs live.

A knob is an environment variable a service reads at start-up, or a server argument (a value, a
flag, a key of a JSON-valued argument: :mod:`servelab.core.knob`), declared in the spec under
``knobs``. Its value lives in three places: the file (the env file; for an argument, the place
:mod:`servelab.core.knobs.places` picks: ``args_env``, the spec's own command line, the
``--config`` file), the latest backup of that file (what it was before the last change) and the
running process (``/proc/PID/environ``; ``/proc/PID/cmdline``: what is live now). Editing the file
changes nothing live until a restart. Argument knobs go through :mod:`servelab.ops.arguments`.

Only declared knobs and the names on :data:`~servelab.core.knobs.rules.ENV_ALLOW_LIST` are ever read
into results (:func:`~servelab.core.knobs.rules.check_knob_name`); reading the file, its backups and
the process lives in :mod:`servelab.io.hosts.envfiles` and :mod:`servelab.io.hosts.discovery`.

``set_knob`` writes the env file atomically (temp file, fsync, rename) after a timestamped backup,
through the service's :class:`~servelab.io.hosts.host.Host`, so it works the same over SSH. Every
operation takes an :class:`~servelab.ops.context.Operation` (its hosts are reused) or a bare spec.
"""

from __future__ import annotations

from servelab.core.case.record import CaseRecord
from servelab.core.deploy.spec import DeploymentSpec
from servelab.core.engines import engine
from servelab.core.knob import Knob, parse_knob, same_value
from servelab.core.knobs.argv import arg_values, knob_value
from servelab.core.knobs.configfile import config_values
from servelab.core.knobs.contract import KnobChange, KnobDiff, KnobValue
from servelab.core.knobs.envfile import parse_envfile
from servelab.core.knobs.places import Place, split_args
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.knobs.rules import check_knob_name, parse_env_bytes
from servelab.core.knobs.unread import ReadVerdict, UnreadKnob
from servelab.core.knobs.values import check_value
from servelab.core.redaction import mask
from servelab.errors import CaseError, HostError, KnobError
from servelab.io.hosts.discovery import find_process, read_live, read_live_unless_blank
from servelab.io.hosts.envfiles import (
    MAX_FILE_BYTES,
    config_field,
    env_field,
    previous_version,
    read_env_bytes,
    read_env_file,
)
from servelab.io.hosts.place import make_place
from servelab.io.hosts.processes import spec_mark
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.io.specfile import LoadedSpec
from servelab.ops.arguments import (
    argument_knob,
    live_argument,
    place_path,
    read_places,
    service_engine,
    service_flags,
    write_argument,
)
from servelab.ops.context import Operation, SpecOrOperation, operation
from servelab.ops.reads import knob_reads
from servelab.ops.sharedfile import file_readers, launch_reading, read_back, set_reading

__all__ = [
    "check_setting",
    "diff_knob",
    "get_knob",
    "knob_owner",
    "live_knob",
    "live_knobs",
    "not_as_file",
    "read_knob",
    "set_knob",
]


# -- results -----------------------------------------------------------------------------------


# -- reading ----------------------------------------------------------------------------------


def _env_path(op: Operation, service: str) -> str:
    path = op.env_path(service)
    if path is None:
        raise KnobError(f"service {service!r} has no env_file in the spec")
    return path


async def _live_values(
    op: Operation, service: str, names: list[str]
) -> tuple[int | None, dict[str, str | None]]:
    """(pid, live value of each name): env knobs from ``/proc/PID/environ``, argument knobs from
    ``/proc/PID/cmdline`` (with its ``--config``); (None, {}) when the service is not running."""
    host = op.host(service)
    proc = await find_process(op.loaded, service, host)
    if proc.pid is None:
        return None, {}
    env_names = [name for name in names if argument_knob(op, name).is_env]
    args = [argument_knob(op, name) for name in names if name not in env_names]
    live: dict[str, str | None] = dict(await read_live(host, proc.pid, env_names))
    if args:
        _, values = await live_argument(op, service, args)
        live.update({name: got.value for name, got in values.items()})
    return proc.pid, {name: live.get(name) for name in names}


async def live_knobs(target: SpecOrOperation) -> dict[str, str | None]:
    """Every declared knob of every running service, live, as ``{"service/NAME": value}``.

    What a measurement ran with (soaks record it, so a case can tell whether a soak failed with a
    knob and passed without it). A service that is not running is left out; a secret-looking
    knob's value is masked (:func:`~servelab.core.redaction.mask`: it is stored).
    """
    out: dict[str, str | None] = {}
    async with operation(target) as op:
        for name, svc in op.spec.services.items():
            if not svc.knobs:
                continue
            pid, live = await _live_values(op, name, list(svc.knobs))
            if pid is not None:
                out.update({f"{name}/{knob}": mask(knob, value) for knob, value in live.items()})
    return out


async def live_knob(target: SpecOrOperation, service: str, name: str) -> str | None:
    """The knob's value in the running process now (None: unset or not running)."""
    check_knob_name(target.spec, service, name)
    async with operation(target) as op:
        return (await _live_values(op, service, [name]))[1].get(name)


# -- the three operations ----------------------------------------------------------------------


async def read_knob(target: SpecOrOperation, service: str, name: str) -> KnobValue:
    """The knob's value in the service's file, and where it comes from."""
    check_knob_name(target.spec, service, name)
    async with operation(target) as op:
        knob = argument_knob(op, name)
        if not knob.is_env:
            now = await read_places(op, service, knob)
            place = None if now.place is None else str(now.place)
            shadowed = tuple((str(where), value) for where, value in now.shadowed)
            path = place_path(op, service, now.place)
            short = tuple((str(where), word) for where, word in now.abbreviated) or None
            return KnobValue(service, name, now.value, place, path, shadowed, short)
        path = _env_path(op, service)
        env = await read_env_file(op.host(service), path, field=env_field(service))
    return KnobValue(service, name, None if env is None else env.get(name), "env_file", path)


async def get_knob(target: SpecOrOperation, service: str, name: str) -> str | None:
    """The knob's value in the service's file (None: not set, the engine's default)."""
    return (await read_knob(target, service, name)).value


async def diff_knob(target: SpecOrOperation, service: str, name: str) -> KnobDiff:
    """The knob's value in its file, in that file's latest backup, and in the running process."""
    svc = check_knob_name(target.spec, service, name)
    async with operation(target) as op:
        knob = argument_knob(op, name)
        if not knob.is_env:
            return await _diff_argument(op, service, knob)
        path = _env_path(op, service)
        host = op.host(service)
        raw = await read_env_bytes(host, path, field=env_field(service))
        env = None if raw is None else parse_env_bytes(raw, path)
        previous = await previous_version(host, path, raw, op.backup_dir(service))
        backup_path, backup = previous if previous is not None else (None, None)
        proc = await find_process(op.loaded, service, host)
        live = await read_live_unless_blank(host, proc.pid, [name]) if proc.pid else {}
        file = None if env is None else env.get(name)
        live, launched = await launch_reading(op, service, proc.pid, name, file, live)
    return KnobDiff(
        service=service,
        name=name,
        file=file,
        backup=None if backup is None else backup.get(name),
        live=None if live is None else live.get(name),
        spec_value=svc.knobs.get(name),
        backup_path=backup_path,
        env_file=path,
        pid=proc.pid,
        pid_source=proc.source,
        live_read=live is not None,
        launched=launched or None,
    )


async def not_as_file(target: SpecOrOperation, service: str) -> list[KnobDiff]:
    """The declared knobs ``service``'s running process holds at another value than its file
    (read as ``knob diff`` reads them; empty when it is not running or every one matches)."""
    async with operation(target) as op:
        diffs = [await diff_knob(op, service, name) for name in op.spec.service(service).knobs]
    return [d for d in diffs if d.verdict is not None and not d.verdict.ok]


async def _backup_value(
    op: Operation, service: str, knob: Knob, place: Place | None
) -> tuple[str | None, str | None]:
    """(backup path, the knob's value in it) of the file of ``place``: the latest backup whose
    content differs from the file now (the value before the last change)."""
    svc = op.spec.service(service)
    path = op.env_path(service) if place is Place.ARGS_ENV else None
    field = env_field(service)
    if place is Place.CONFIG_FILE and svc.config_file is not None:
        path, field = str(op.loaded.path(svc.config_file)), config_field(service)
    if path is None:
        return None, None
    host = op.host(service)
    current = await read_env_bytes(host, path, field=field)
    found = await _previous_bytes(op, service, path, current)
    if found is None:
        return None, None
    backup_path, data = found
    eng, flags = service_engine(op), service_flags(op, service)
    if place is Place.ARGS_ENV and svc.args_env is not None:
        words = split_args(parse_env_bytes(data, backup_path).get(svc.args_env))
        return backup_path, knob_value(arg_values(words, eng, flags), knob, eng)
    return backup_path, knob_value(config_values(data, eng, backup_path, flags), knob, eng)


async def _previous_bytes(
    op: Operation, service: str, path: str, current: bytes | None
) -> tuple[str, bytes] | None:
    host = op.host(service)
    previous = await previous_version(host, path, current, op.backup_dir(service))
    if previous is None:
        return None
    try:
        return previous[0], await host.read_file(previous[0], limit=MAX_FILE_BYTES)
    except HostError:
        return None


async def _diff_argument(op: Operation, service: str, knob: Knob) -> KnobDiff:
    svc = op.spec.service(service)
    now = await read_places(op, service, knob)
    backup_path, backup = await _backup_value(op, service, knob, now.place)
    pid, live = await _live_values(op, service, [knob.name])
    proc_source = "not running" if pid is None else "process"
    return KnobDiff(
        service=service,
        name=knob.name,
        file=now.value,
        backup=backup,
        live=live.get(knob.name),
        spec_value=svc.knobs.get(knob.name),
        backup_path=backup_path,
        env_file=place_path(op, service, now.place),
        pid=pid,
        pid_source=proc_source,
        place=None if now.place is None else str(now.place),
        shadowed=tuple((str(place), value) for place, value in now.shadowed),
        abbreviated=tuple((str(place), word) for place, word in now.abbreviated) or None,
    )


async def _live_value(
    op: Operation, service: str, name: str
) -> tuple[int | None, str | None, str | None]:
    """(pid, live value, error): a failure to look is reported, not raised."""
    try:
        pid, live = await _live_values(op, service, [name])
    except HostError as exc:
        return None, None, f"{type(exc).__name__}: {exc}"
    return pid, live.get(name), None


async def _reader(op: Operation, other: str, knob: Knob) -> tuple[str, bool, str | None, bool]:
    """(``other``, running, its live value, read back): a value that could not be read (a host
    error, a router's command line written over: :func:`~servelab.ops.sharedfile.read_back`)
    is not read back, never "unset"."""
    pid, seen, error = await _live_value(op, other, knob.name)
    if error is not None or pid is None:
        return other, pid is not None, seen, error is None
    said = await read_back(op, other, knob, seen)
    return other, True, said.value, said.known


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
    """Set (``value=None``: remove) a knob in its file: backup, atomic write, record.

    An env knob goes in the env file; an argument knob in the place
    :func:`~servelab.core.knobs.places.write_place` picks (refused before anything is touched when
    the spec names none). Nothing is written or recorded when the file already holds ``value``.
    The change is recorded (in ``ledger``, else the operation's) right after the write; a ledger
    that cannot take a record (read-only, a full disk) is refused first, nothing written; one
    that fails the record after all (the disk filled meanwhile) has the file put back.
    ``restart_needed`` is true when the service runs with another value (or its live value could
    not be read: ``live_error``; a router's, as :func:`~servelab.ops.sharedfile.set_reading`
    reads it), or another service that reads the same file does (``shared``).
    """
    svc = target.spec.service(service)
    value = check_setting(target.spec, service, name, value)
    async with operation(target, ledger=ledger) as op:
        if (
            case_id is not None
            and op.ledger is not None
            and op.ledger.get(CaseRecord, case_id) is None
        ):
            raise CaseError(f"unknown case {case_id}: open one with `servelab case open TITLE`")
        knob = argument_knob(op, name)
        if op.ledger is not None:  # a change never goes unrecorded: a full or read-only ledger
            op.ledger.check_writable()  # is refused before the file is touched
        written = await _write(op, service, knob, value)
        old, path, backup_path, changed, place = written
        change_id = None
        if changed:
            try:
                change_id = _record_change(op, service, name, old, value, reason, case_id,
                                           backup_path)  # fmt: skip
            except BaseException:  # the disk filled since the check: never a change unrecorded
                await _put_back(op, service, path, backup_path)
                raise
        pid, live, live_error = await _live_value(op, service, name)
        live, live_read, launched = await set_reading(op, service, pid, knob, live, value)
        unread = await _unread(op, service, knob) if pid is not None else None
        shared = [await _reader(op, other, knob) for other in
                  await file_readers(op, service, path, place)]  # fmt: skip
    stale = [(other, seen, read) for other, running, seen, read in shared  # another value
             if not read or (running and not same_value(seen, value))]  # fmt: skip
    return KnobChange(
        service=service,
        name=name,
        old=old,
        new=value,
        changed=changed,
        backup_path=backup_path,
        env_file=path,
        restart_needed=(pid is not None and not same_value(live, value))
        or live_error is not None
        or not live_read
        or bool(stale),
        running=pid is not None,
        live=live,
        spec_value=svc.knobs.get(name),
        change_id=change_id,
        live_error=live_error,
        place=place,
        unread=unread,
        shared=tuple((other, seen) for other, seen, _ in stale),
        shared_unread=tuple(other for other, _, read in stale if not read),
        live_read=live_read,
        launched=launched,
    )


async def _unread(op: Operation, service: str, knob: Knob) -> UnreadKnob | None:
    """The knob judged against what the running engine reads, when it is not read (or its
    release has no list); None otherwise, or when the engine does not say its release."""
    try:
        (found,) = await knob_reads(op, service, [knob.name])
    except HostError:
        return None
    bad = found.verdict in (ReadVerdict.NOT_READ, ReadVerdict.UNKNOWN)
    return found if bad and found.version is not None else None


async def _write(
    op: Operation, service: str, knob: Knob, value: str | None
) -> tuple[str | None, str, str | None, bool, str]:
    """Write the knob: (old value, file written, its backup, changed, place)."""
    if not knob.is_env:
        edit = await write_argument(op, service, knob, value)
        return edit.before.value, edit.path, edit.backup_path, edit.changed, str(edit.place)
    path = _env_path(op, service)
    env = await read_env_file(op.host(service), path, field=env_field(service))
    old = None if env is None else env.get(knob.name)
    if old == value:
        return old, path, None, False, "env_file"
    base = env if env is not None else parse_envfile("", source=path)
    new_env = base.set(knob.name, value) if value is not None else base.unset(knob.name)
    backup = await op.write_env(service, path, new_env.encode(), backup=env is not None)
    return old, path, backup, True, "env_file"


async def _put_back(op: Operation, service: str, path: str, backup_path: str | None) -> None:
    """Write the file back as it was before this change (its backup), when it had one."""
    if backup_path is not None:
        data = await op.host(service).read_file(backup_path, limit=MAX_FILE_BYTES)
        await op.write_env(service, path, data, backup=False)


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
    make_place(op.loaded.state_dir)  # the change names this folder's deployment (its id)
    return op.ledger.add(
        KnobChangeRecord(
            id=0,
            at=NOW,
            service=service,
            name=name,
            old=old,
            new=new,
            reason=reason,
            case_id=case_id,
            backup_path=backup_path,
            deployment=knob_owner(op.loaded, service),
        )
    )


def knob_owner(loaded: LoadedSpec, service: str) -> str:
    """Who a knob change of ``service`` is, as ``knob_changes.deployment`` records it (issue 38):
    the service's mark (:func:`~servelab.io.hosts.processes.spec_mark`), so two specs of one name
    sharing a ledger are two deployments; the bare name when the spec has no such service.
    Compared with :func:`~servelab.io.hosts.ownrecord.made_by`."""
    spec = loaded.spec
    return spec_mark(loaded, service) if service in spec.services else spec.name


def check_setting(spec: DeploymentSpec, service: str, name: str, value: str | None) -> str | None:
    """The one check of a knob's value before anything is touched (``knob set``, and every value
    of an ``ab``, a ``tune`` or ``tune --plan`` before its first restart): ``service`` exists,
    ``name`` is declared there, ``value`` can be written and read back as itself
    (:func:`~servelab.core.knobs.values.check_value`). The value as stored (a flag's ``true`` is
    ``on``), else SpecError or KnobError (exit 2)."""
    check_knob_name(spec, service, name)
    rules = engine(spec.engine)
    return check_value(parse_knob(name, rules), value, rules)
