"""Whether the deployment is up, before a command that measures it changes anything (issue 38).

``ab`` and ``tune`` restart services for their arms and measure through the router: on a
deployment that is down (its router, or a worker, not running) they used to start a decode, wait
for a router that could never be ready, fail mid-way and leave the decode running.
:func:`refuse_not_up` probes every service's readiness path once, side by side, and raises
:class:`~servelab.core.deploy.refusals.RunRefused` carrying a
:class:`~servelab.core.deploy.refusals.NotUp` (exit 2) naming each one not ready, before anything
is started, stopped or written. Before that, the processes serving the services must be this
copy's: a copy of a running spec with its own state folder runs nothing of its own, and its arms
would set its env files and restart the other copy's processes
(:func:`~servelab.ops.deploy.anothers.anothers_processes`, the check ``verify`` makes: a
``RunRefused`` carrying :class:`~servelab.core.deploy.refusals.AnothersProcesses`, exit 2).
"""

from __future__ import annotations

import asyncio

from servelab.core.deploy.refusals import AnothersProcesses, NotUp, RunRefused
from servelab.ops.context import Operation
from servelab.ops.deploy.anothers import anothers_processes
from servelab.ops.deploy.services import readiness

__all__ = ["refuse_not_up"]


async def refuse_not_up(op: Operation, command: str) -> None:
    """Raise :class:`RunRefused` (:class:`NotUp`) unless every service of ``op``'s spec answers
    its readiness path ready, or :class:`AnothersProcesses` when another copy of this deployment
    serves them; ``command`` is the refused command's name."""
    names = list(op.spec.services)
    if held := await anothers_processes(op, names):
        raise RunRefused(AnothersProcesses(held, command))
    probes = await asyncio.gather(*(readiness(op, name) for name in names))
    down = tuple((name, found) for name, found in zip(names, probes, strict=True) if not found.ok)
    if down:
        raise RunRefused(NotUp(command, down, tuple(op.loaded.spec_args)))
