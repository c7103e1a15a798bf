"""The other services that read the file a knob was written to (the same file on the same host:
the same path, or a link to it): a change to a shared env file (two decode replicas, one
``env_file``, or two env files linked to one) or ``config_file`` is a change to each of them,
which the one restart rule restarts together
(:func:`servelab.core.deploy.topology.restart_plan`). ``knob set`` names those still running
another value (:func:`read_back`: a router's value as far as it can be read, else "not read
back", never "unset"); an arm (:mod:`servelab.ops.arm`) reads its value back from each of them."""

from __future__ import annotations

from servelab.core.deploy.topology import file_identity, file_sharers
from servelab.core.knob import Knob
from servelab.core.knobs.places import LiveSource
from servelab.core.knobs.serverinfo import Reported
from servelab.errors import HostError
from servelab.io.hosts.discovery import read_live_unless_blank
from servelab.ops.arguments import engine_arguments, live_argument
from servelab.ops.context import Operation
from servelab.ops.fileids import file_identities

__all__ = ["env_blank", "file_readers", "read_back"]


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
