"""The pre-flight of ``up`` and ``restart``: before the first service starts (or stops), check
every service about to start (rules: :mod:`servelab.core.deploy.preflight`).

- its env file is readable and parses (a bad line is named by file and line, never shown), and so
  is its ``config_file`` (bounded: an alias bomb, a UTF-16 or binary file is refused), so a
  restart never stops a service its engine then cannot start again;
- every port it binds is free on its host, or held by its own recorded process group (which is
  stopped before it starts again) or, for ``restart``, by a service with a ``stop`` command or
  systemd unit (which stops it);
- ``start = "router"``: the router module imports with the Python that will launch it;
- a systemd ``unit``: systemd loaded the unit file as it is on disk (``NeedDaemonReload``), else a
  restart would start the old command line. With ``manage_unit = true`` servelab runs
  ``systemctl daemon-reload`` itself; otherwise the pre-flight stops, saying what to run.

For ``up``, a service already up (its recorded process alive, or its port's owner ready) is not
about to start and is not checked. A failure raises one error naming each service and what it
lacks (:class:`~servelab.errors.KnobError` when the first problem is an env line that does not
parse, else :class:`~servelab.errors.ServiceStartError`); nothing has been started or stopped.
"""

from __future__ import annotations

import shlex
import sys

from servelab.core.deploy.events import UnitReloaded
from servelab.core.deploy.preflight import (
    PROBLEM_ENV,
    PROBLEM_MODULE,
    PROBLEM_PORT,
    PROBLEM_UNIT,
    PortState,
    Problem,
    Requirement,
    ServiceFacts,
    bound_ports,
    problems,
    requirements,
)
from servelab.core.engines import engine
from servelab.core.knobs.configfile import config_values
from servelab.core.knobs.rules import parse_env_bytes
from servelab.errors import CommandTimeout, HostError, KnobError, ServiceStartError
from servelab.io.hosts.discovery import QUERY_TIMEOUT_S, daemon_reload, unit_needs_reload
from servelab.io.hosts.envfiles import (
    MAX_FILE_BYTES,
    config_field,
    env_field,
    read_config_bytes,
    unread_refusal,
)
from servelab.io.hosts.processes import PidRecord, is_alive, proc_stat
from servelab.io.http.client import probe
from servelab.ops.arguments import config_path
from servelab.ops.context import Operation
from servelab.ops.deploy.ownership import own_record

__all__ = ["check_before_start", "env_bytes", "preflight_message"]

_PROBE_TIMEOUT_S = 5.0


async def env_bytes(op: Operation, service: str, path: str) -> bytes:
    """The env file as this operation last wrote it (``knob set``), else as read from its host."""
    return op.written_env(service, path) or await op.host(service).read_file(
        path, limit=MAX_FILE_BYTES
    )


async def _env_facts(op: Operation, service: str) -> tuple[str | None, str | None]:
    """(parse error, read error) of the service's env file; both None when it parses."""
    path = op.env_path(service)
    if path is None:
        return None, None
    try:
        raw = await env_bytes(op, service, path)
    except HostError as exc:
        if (refused := unread_refusal(exc, path, env_field(service))) is not None:
            return str(refused), None  # bad input: a FIFO, a device, too large
        return None, f"cannot read its env file: {exc}"
    try:
        parse_env_bytes(raw, path)
    except KnobError as exc:
        return str(exc), None
    return None, None


async def _config_facts(op: Operation, service: str) -> tuple[str | None, str | None]:
    """(parse error, read error) of the service's ``config_file``, read as its engine will read
    it (bounded: :mod:`servelab.core.knobs.configyaml`); both None when it parses."""
    path = config_path(op, service)
    if path is None or op.spec.service(service).role not in ("prefill", "decode"):
        return None, None
    try:
        field = config_field(service)
        raw = op.written_env(service, path) or await read_config_bytes(
            op.host(service), path, field=field
        )
    except KnobError as exc:  # a FIFO, a device, too large: bad input
        return str(exc), None
    except HostError as exc:
        return None, f"cannot read its config file: {exc}"
    if raw is None:
        return None, f"cannot read its config file {path}: no such file"
    try:
        config_values(raw, engine(op.spec.engine), path)
    except KnobError as exc:
        return str(exc), None
    return None, None


def _groups(record: PidRecord | None) -> set[int]:
    """The process groups servelab recorded for the service (launcher, and adopted server)."""
    if record is None:
        return set()
    groups = {record.pgid}
    served = record.extra.get("served_by")
    if isinstance(served, dict) and isinstance(served.get("pgid"), int):
        groups.add(served["pgid"])
    return groups


async def _port_states(op: Operation, service: str, *, restarting: bool) -> tuple[PortState, ...]:
    svc = op.spec.service(service)
    host = op.host(service)
    groups = _groups(await own_record(op, service))
    stopped_by_command = restarting and (svc.stop is not None or svc.unit is not None)
    states = []
    for claim in bound_ports(svc):
        owner = await host.listening_pid(claim.port)
        own = stopped_by_command
        if owner is not None and not own:
            stat = await proc_stat(host, owner)
            own = stat is not None and stat.pgid in groups
        states.append(PortState(claim, owner, own))
    return tuple(states)


def _import_check(need: Requirement) -> str:
    """A command that exits 0 when the module imports and its distribution is the pinned one."""
    code = (
        "import importlib.util, importlib.metadata as m, sys; "
        f"sys.exit(0 if importlib.util.find_spec({need.module!r}) is not None else 1)"
    )
    if need.pinned is not None:
        dist, version = need.pinned
        code += f"; sys.exit(0 if m.version({dist!r}) == {version!r} else 1)"
    return shlex.join([sys.executable, "-c", code])


async def _missing(op: Operation, service: str) -> tuple[Requirement, ...]:
    host = op.host(service)
    missing = []
    for need in requirements(op.spec.service(service), op.spec.engine):
        try:
            ok = (await host.run(_import_check(need), timeout=QUERY_TIMEOUT_S)).ok
        except (CommandTimeout, HostError):
            ok = False
        if not ok:
            missing.append(need)
    return tuple(missing)


async def _stale_unit(op: Operation, service: str) -> str | None:
    """The unit when it changed on disk and stays unreloaded (reloaded here with manage_unit)."""
    svc = op.spec.service(service)
    if svc.unit is None:
        return None
    host = op.host(service)
    if not await unit_needs_reload(host, svc.unit):
        return None
    if not svc.manage_unit:
        return svc.unit
    await daemon_reload(host)
    op.say(UnitReloaded(service, svc.unit))
    return svc.unit if await unit_needs_reload(host, svc.unit) else None


async def _facts(op: Operation, service: str, *, restarting: bool) -> ServiceFacts:
    env_error, env_unreadable = await _env_facts(op, service)
    config_error, config_unreadable = await _config_facts(op, service)
    env_error, env_unreadable = env_error or config_error, env_unreadable or config_unreadable
    return ServiceFacts(
        service=service,
        host=op.host(service).name,
        env_error=env_error,
        env_unreadable=env_unreadable,
        ports=await _port_states(op, service, restarting=restarting),
        missing=await _missing(op, service),
        stale_unit=await _stale_unit(op, service),
    )


async def _is_up(op: Operation, service: str) -> bool:
    """``up`` will skip it: its recorded process is alive, or its port's owner is ready."""
    host = op.host(service)
    record = await own_record(op, service)
    if record is not None and await is_alive(host, record):
        return True
    svc = op.spec.service(service)
    if await host.listening_pid(svc.port) is None:
        return False
    url = await op.url(service, op.spec.readiness_path(service))
    return (await probe(url, timeout=_PROBE_TIMEOUT_S)).ok


def _describe(problem: Problem) -> str:
    if problem.kind == PROBLEM_PORT and problem.port is not None:
        claim = problem.port.claim
        return (
            f"port {claim.port} ({claim.field}) on {problem.host} is held by pid "
            f"{problem.port.owner}, not by this service"
        )
    if problem.kind == PROBLEM_MODULE and problem.need is not None:
        package = problem.need.package
        return (
            f"cannot import {problem.need.module} with {sys.executable} on {problem.host}, or "
            f"not at the pinned version: install {package} (pip install '{package}')"
        )
    if problem.kind == PROBLEM_UNIT:
        return (
            f"systemd unit {problem.unit} changed on disk and is not reloaded, so a start would "
            f"run its old command line: run `systemctl daemon-reload` on {problem.host} (or set "
            "manage_unit = true in the spec)"
        )
    return problem.env_error or problem.kind


def preflight_message(found: list[Problem]) -> str:
    """One line: each service and what it lacks, then that nothing was started or stopped."""
    parts = [f"{problem.service}: {_describe(problem)}" for problem in found]
    return "; ".join(parts) + " (pre-flight: nothing was started or stopped)"


async def check_before_start(op: Operation, plan: list[str], *, restarting: bool) -> None:
    """Raise when a service of ``plan`` about to start lacks something; see the module doc."""
    facts = []
    for service in plan:
        if not restarting and await _is_up(op, service):
            continue
        facts.append(await _facts(op, service, restarting=restarting))
    found = problems(facts)
    if not found:
        return
    if found[0].kind == PROBLEM_ENV:
        raise KnobError(preflight_message(found))
    raise ServiceStartError(preflight_message(found))
