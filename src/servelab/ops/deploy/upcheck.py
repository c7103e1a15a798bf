"""Whether the deployment is up, before a command that measures it changes anything (issue 38).

``ab`` and ``tune`` restart services for their arms and measure through the router: on a
deployment that is down (its router, or a worker, not running) they used to start a decode, wait
for a router that could never be ready, fail mid-way and leave the decode running.
:func:`refuse_not_up` probes every service's readiness path once, side by side, and raises
:class:`~servelab.core.deploy.refusals.RunRefused` carrying a
:class:`~servelab.core.deploy.refusals.NotUp` (exit 2) naming each one not ready, before anything
is started, stopped or written.
"""

from __future__ import annotations

import asyncio

from servelab.core.deploy.refusals import NotUp, RunRefused
from servelab.ops.context import Operation
from servelab.ops.deploy.services import readiness

__all__ = ["refuse_not_up"]


async def refuse_not_up(op: Operation, command: str) -> None:
    """Raise :class:`RunRefused` (:class:`NotUp`) unless every service of ``op``'s spec answers
    its readiness path ready; ``command`` is the refused command's name."""
    names = list(op.spec.services)
    probes = await asyncio.gather(*(readiness(op, name) for name in names))
    down = tuple((name, found) for name, found in zip(names, probes, strict=True) if not found.ok)
    if down:
        raise RunRefused(NotUp(command, down, tuple(op.loaded.spec_args)))
