"""The other services that read the file a knob was written to (the same path on the same host):
a change to a shared env file (two decode replicas, one ``env_file``) or ``config_file`` is a
change to each of them, which the one restart rule restarts together
(:func:`servelab.core.deploy.topology.restart_plan`). ``knob set`` names those still running
another value; an arm (:mod:`servelab.ops.arm`) reads its value back from each of them."""

from __future__ import annotations

from servelab.core.deploy.topology import file_sharers
from servelab.io.specfile import LoadedSpec

__all__ = ["file_readers"]


def file_readers(loaded: LoadedSpec, service: str, path: str, place: str) -> list[str]:
    """The services other than ``service``, on its host, that read the knob written to ``path``
    at ``place``: ``env_file`` (an env knob: every reader of the env file), ``config_file``
    (every reader of the config file), ``args_env`` (the readers of the env file that expand
    the same variable on their command line). Spec order. Only services the one restart rule
    restarts with ``service`` (:func:`~servelab.core.deploy.topology.file_sharers`: the spec's
    paths compared as written, normalised), so what ``knob set`` says ``restart`` restarts, it
    does."""
    spec = loaded.spec
    own = spec.service(service)
    sharers = file_sharers(spec, [service])
    readers: list[str] = []
    for name, svc in spec.services.items():
        if name == service or name not in sharers:
            continue
        relative = svc.config_file if place == "config_file" else svc.env_file
        if relative is None or str(loaded.path(relative)) != path:
            continue
        if place == "args_env" and svc.args_env != own.args_env:
            continue
        readers.append(name)
    return readers
