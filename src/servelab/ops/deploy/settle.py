"""Before a put-back starts services again: what the interrupted command started is stopped and
each service's port is free (issue 38, H8).

A stop signal can land while a co-restart launches a service; the launch is then finished and
recorded before the cancellation goes on (:func:`~servelab.ops.deploy.services.start`), and the
interrupted step stops it. :func:`settle` makes sure of it before anything starts again: it stops
the plan's services (dependents first, as a restart does: their recorded processes and whatever
of servelab's serves their ports), then waits, bounded by :data:`SETTLE_S`, until each process
recorded before the stop is gone and nothing listens on the service's port. A recorded process
still alive, or a port still held by a process servelab launched, at the deadline raises
:class:`~servelab.errors.ServiceStartError` naming the service, its host, the pid and the port;
a port held by a process without servelab's mark is left to the restart's pre-flight, which
names it.
"""

from __future__ import annotations

import asyncio
import time

from servelab.errors import ServiceStartError
from servelab.io.hosts.discovery import launched_here, service_logs
from servelab.io.hosts.processes import PidRecord, is_alive, spec_mark
from servelab.ops.context import Operation
from servelab.ops.deploy.ownership import own_record
from servelab.ops.deploy.services import stop

__all__ = ["SETTLE_S", "settle"]

#: Seconds :func:`settle` waits, once the services are stopped, for their processes to be gone
#: and their ports free.
SETTLE_S = 15.0
_POLL_S = 0.1


async def _still(
    op: Operation, service: str, record: PidRecord | None
) -> tuple[int | None, int | None]:
    """The recorded pid if it still runs, and the pid listening on the service's port."""
    host = op.host(service)
    alive = record is not None and await is_alive(host, record)
    owner = await host.listening_pid(op.spec.service(service).port)
    return (record.pid if alive and record is not None else None), owner


async def _until_free(
    op: Operation, service: str, record: PidRecord | None, deadline: float
) -> None:
    """Wait until ``record``'s process is gone and nothing listens on ``service``'s port."""
    while True:
        pid, owner = await _still(op, service, record)
        if pid is None and owner is None:
            return
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(_POLL_S)
    host = op.host(service)
    logs = await service_logs(op.loaded, service, host)
    mark = spec_mark(op.loaded, service)
    ours = owner is not None and await launched_here(host, owner, mark, logs)
    if pid is None and not ours:
        return  # a process without servelab's mark holds the port: the pre-flight names it
    said = [f"pid {pid} still runs"] if pid is not None else []
    if ours:
        said.append(f"port {op.spec.service(service).port} is still held by pid {owner}")
    raise ServiceStartError(
        f"{service}: {' and '.join(said)} on {host.name} {SETTLE_S:g}s after it was stopped; "
        "not starting it over them"
    )


async def settle(op: Operation, plan: list[str]) -> None:
    """Stop ``plan``'s services (dependents first), then wait until each one's recorded process
    is gone and its port free (module docstring)."""
    records = {name: await own_record(op, name) for name in plan}
    for name in reversed(plan):
        await stop(op, name)
    deadline = time.monotonic() + SETTLE_S
    for name in plan:
        await _until_free(op, name, records[name], deadline)
