"""Whether another copy of this deployment runs the processes serving its services (issue 38).

A copy of a running spec with its own state folder (``cp a/servelab.toml c/; cp -r a/env c/``)
runs nothing of its own: the ports it names answer with the first copy's processes, which carry
that copy's mark. :func:`anothers_processes` finds them (a process of a deployment of another
name, the one an ``init`` spec describes, is not another copy's: it is read as it runs). One check
for every command that would act on them as this deployment's: ``verify`` refuses to read them
(:class:`~servelab.core.deploy.refusals.VerifyRefused`), ``ab`` and ``tune`` to set this copy's
env files and restart them (:func:`servelab.ops.deploy.upcheck.refuse_not_up`,
:class:`~servelab.core.deploy.refusals.RunRefused`); both carry
:class:`~servelab.core.deploy.refusals.AnothersProcesses`, worded in
:mod:`servelab.report.refusals`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from servelab.core.deploy.refusals import AnothersProcess
from servelab.core.deploy.whose import Whose, others_of
from servelab.errors import HostError
from servelab.io.hosts.discovery import find_process
from servelab.io.hosts.processes import spec_mark
from servelab.ops.context import Operation

__all__ = ["anothers_processes"]


async def anothers_processes(op: Operation, services: Iterable[str]) -> tuple[AnothersProcess, ...]:
    """The processes serving ``services`` (read side by side) that carry the mark of another
    copy of this deployment, in the order of ``services``. Reads only."""
    found = await asyncio.gather(*(_anothers(op, name) for name in services))
    return tuple(process for process in found if process is not None)


async def _anothers(op: Operation, service: str) -> AnothersProcess | None:
    """The process serving ``service`` when it carries the mark of another copy of this
    deployment (None: this deployment's, a stranger's, another name's, none, or its host did not
    answer: the layers say so)."""
    try:
        proc = await find_process(op.loaded, service, op.host(service))
    except HostError:
        return None
    if proc.pid is None or proc.others is None:
        return None
    whose = others_of(proc.others, spec_mark(op.loaded, service))
    if whose.whose is Whose.NAMED:  # what `init` wrote a spec for: a running deployment
        return None
    return AnothersProcess(service, op.spec.service(service).host, proc.pid, whose)
