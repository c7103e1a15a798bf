"""The other services that read the file a knob was written to (the same file on the same host:
the same path, or a link to it): a change to a shared env file (two decode replicas, one
``env_file``, or two env files linked to one) or ``config_file`` is a change to each of them,
which the one restart rule restarts together
(:func:`servelab.core.deploy.topology.restart_plan`). ``knob set`` names those still running
another value (:func:`read_back`: a router's value as far as it can be read, else "not read
back", never "unset"); an arm (:mod:`servelab.ops.arm`) reads its value back from each of them."""

from __future__ import annotations

from servelab.core.deploy.topology import file_identity, file_sharers
from servelab.core.knob import Knob, same_value
from servelab.core.knobs.places import LiveSource
from servelab.core.knobs.rules import live_verdict
from servelab.core.knobs.serverinfo import Reported
from servelab.errors import HostError, KnobError
from servelab.io.hosts.discovery import find_process, read_live_unless_blank
from servelab.io.hosts.envfiles import read_env_file
from servelab.ops.arguments import ENV_AT_LAUNCH, engine_arguments, launch_copy, live_argument
from servelab.ops.context import Operation
from servelab.ops.fileids import file_identities

__all__ = [
    "env_at_launch",
    "env_blank",
    "file_readers",
    "launch_reading",
    "launched_env_value",
    "read_back",
    "set_reading",
]


async def file_readers(op: Operation, service: str, path: str, place: str) -> list[str]:
    """The services other than ``service``, on its host, that read the knob written to ``path``
    at ``place``: ``env_file`` (an env knob: every reader of the env file), ``config_file``
    (every reader of the config file), ``args_env`` (the readers of the env file that expand
    the same variable on their command line). Spec order. Only services the one restart rule
    restarts with ``service`` (:func:`~servelab.core.deploy.topology.file_sharers`: the files
    compared by their identity on their host, :func:`~servelab.ops.fileids.file_identities`),
    so what ``knob set`` says ``restart`` restarts, it does."""
    loaded, spec = op.loaded, op.spec
    own = spec.service(service)
    same = await file_identities(op)
    sharers = file_sharers(spec, [service], same)
    mine = own.config_file if place == "config_file" else own.env_file
    written = file_identity(own, mine, same) if mine else None
    readers: list[str] = []
    for name, svc in spec.services.items():
        if name == service or name not in sharers:
            continue
        relative = svc.config_file if place == "config_file" else svc.env_file
        if relative is None:
            continue
        if str(loaded.path(relative)) != path and file_identity(svc, relative, same) != written:
            continue
        if place == "args_env" and svc.args_env != own.args_env:
            continue
        readers.append(name)
    return readers


async def read_back(op: Operation, service: str, knob: Knob, live: str | None) -> Reported:
    """``live`` (the value read from running ``service``'s process) as far as it was read. A
    router writes over its command line and environment (sglang-router's ``sglang::router``),
    so a value not found there is not "unset": an argument is read from what the router
    reports it runs with (its policy); one it does not report (yet), or an env knob, is not
    read back (``known`` False), never a value. Any other service: ``live``, known. ``where``
    names the report a value was read from (empty: the process itself)."""
    if op.spec.service(service).role != "router" or live is not None:
        return Reported(True, live)
    if not knob.is_env:
        _, values = await live_argument(op, service, [knob])
        got = values.get(knob.name)
        if got is not None and got.source is not LiveSource.DEFAULT:  # its argv was read
            return Reported(True, live)
    said = (await engine_arguments(op, service, [knob]))[knob.name]
    return said if said.known else Reported(False)


async def env_blank(op: Operation, service: str, pid: int) -> bool:
    """Whether running ``service``'s environment reads blank (a router that wrote its title over
    it: :func:`~servelab.io.hosts.discovery.read_live_unless_blank`): an env knob not found there
    is not read back, never "unset" (``knob set`` on the router's own knob, as on a sharer's)."""
    try:
        return await read_live_unless_blank(op.host(service), pid, []) is None
    except HostError:  # gone meanwhile: what was read stands
        return False


async def env_at_launch(op: Operation, service: str, pid: int) -> dict[str, str] | None:
    """The environment file ``pid`` was launched with, as servelab copied it then (its pid
    record's ``env_at_launch``): what a router that wrote over its environment runs with, read
    from servelab's own record. None: not launched by servelab (or by one that kept no copy),
    the copy gone, unreadable or not parsing; nothing is then known from it."""
    copy = launch_copy(op, service, pid, ENV_AT_LAUNCH)
    if copy is None:
        return None
    try:
        env = await read_env_file(op.host(service), copy)
    except (HostError, KnobError):
        return None
    return None if env is None else env.as_dict()


async def launch_reading(
    op: Operation,
    service: str,
    pid: int | None,
    name: str,
    file: str | None,
    live: dict[str, str] | None,
) -> tuple[dict[str, str] | None, bool]:
    """Env knob ``name`` of ``service`` (``pid``; ``live``: its environment as read, None: read
    blank, a router that wrote over it) as ``verify`` reads it: ``(copy, True)`` when the copy of
    the env file servelab kept when it launched it (:func:`env_at_launch`) holds another value
    than the file's ``file`` (a restart is needed); else ``(live, False)``, with ``live`` None
    not read back: no copy, or the file's value (which the copy cannot prove live)."""
    if live is not None or pid is None:
        return live, False
    launched = await env_at_launch(op, service, pid)
    if launched is None or live_verdict(file, launched.get(name)).ok:
        return None, False
    return launched, True


async def set_reading(
    op: Operation, service: str, pid: int | None, knob: Knob, live: str | None, value: str | None
) -> tuple[str | None, bool, bool | None]:
    """``knob set``'s reading of running ``service`` (``pid``) once ``value`` is written:
    ``(live, read, launched)``. An argument its process shows at ``value``: what the engine
    reports it runs with, when it says (a process that read another value than its files say
    now is not "already running with" the new one). An env knob not found in an environment
    that reads blank (a router that wrote over it) is not read back (``read`` False: a restart
    is needed), unless the copy of the env file servelab kept when it launched it
    (:func:`env_at_launch`) holds ``value``: what it was started with, live (``launched``
    True). Else ``live`` as read."""
    if pid is not None and not knob.is_env and same_value(live, value):
        reported = (await engine_arguments(op, service, [knob])).get(knob.name)
        return (reported.value if reported is not None and reported.known else live), True, None
    if not (pid and knob.is_env and live is None and await env_blank(op, service, pid)):
        return live, True, None
    copy = await env_at_launch(op, service, pid)
    if copy is None or not same_value(copy.get(knob.name), value):
        return None, False, None
    return copy.get(knob.name), True, True


async def launched_env_value(op: Operation, service: str, name: str) -> Reported:
    """Env knob ``name`` of running router ``service`` not found in its environment: when that
    environment reads blank (written over), its value in the env file servelab copied when it
    launched it (:func:`env_at_launch`: what it was started with, ``where`` that key), not read
    back (``known`` False) without such a copy; else (not running, or an environment that reads)
    unset, as read."""
    proc = await find_process(op.loaded, service, op.host(service))
    if proc.pid is None or not await env_blank(op, service, proc.pid):
        return Reported(True, None)
    launched = await env_at_launch(op, service, proc.pid)
    if launched is None:
        return Reported(False)
    return Reported(True, launched.get(name), ENV_AT_LAUNCH)
