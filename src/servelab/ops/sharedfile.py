"""The other services that read the file a knob was written to (the same file on the same host:
the same path, or a link to it): a change to a shared env file (two decode replicas, one
``env_file``, or two env files linked to one) or ``config_file`` is a change to each of them,
which the one restart rule restarts together
(:func:`servelab.core.deploy.topology.restart_plan`). ``knob set`` names those still running
another value; an arm (:mod:`servelab.ops.arm`) reads its value back from each of them."""

from __future__ import annotations

from servelab.core.deploy.topology import file_identity, file_sharers
from servelab.ops.context import Operation
from servelab.ops.fileids import file_identities

__all__ = ["file_readers"]


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
