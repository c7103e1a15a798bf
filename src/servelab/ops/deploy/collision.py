"""``up`` over a port another deployment serves (issue 38, sixteenth pass H1): a spec whose port
is another live deployment's is never "already up" there.

The process holding a service's port that carries ANOTHER deployment's mark
(:func:`~servelab.io.hosts.discovery.others_mark`) fails the step, naming that deployment, the
pid and the port. A router that cannot be told (no mark, or its environment unreadable or written
over, as the real sglang-router writes over its own) is kept as "already up, not started by
servelab" (a user's own router the spec points at), unless its worker list, when it can be read,
lacks this spec's workers: then it serves another set of workers and the step fails.
"""

from __future__ import annotations

from servelab.core.printable import printable
from servelab.errors import ServiceStartError
from servelab.io.hosts.discovery import others_mark
from servelab.io.hosts.processes import spec_mark
from servelab.ops.context import Operation
from servelab.ops.verify.verify import router_missing

__all__ = ["refuse_foreign", "refuse_not_listing"]


#: Characters of another process's mark quoted at most (the mark is that process's to set).
_MARK_CHARS = 160


def _of_deployment(mark: str) -> str:
    """``<deployment>/<service>@<address>`` as words: ``service@address of deployment NAME``
    (control characters escaped, cut to :data:`_MARK_CHARS`)."""
    if len(mark) > _MARK_CHARS:
        mark = mark[:_MARK_CHARS] + "…"
    name, _, service = printable(mark).rpartition("/")
    return f"{service} of deployment {name}" if name else f"marked {mark}"


async def refuse_foreign(op: Operation, service: str, owner: int) -> None:
    """Raise :class:`~servelab.errors.ServiceStartError` when ``owner``, the process holding
    ``service``'s port, carries another deployment's mark."""
    host, port = op.host(service), op.spec.service(service).port
    other = await others_mark(host, owner, spec_mark(op.spec, service))
    if other is not None:
        raise ServiceStartError(
            f"{service}: port {port} on {host.name} is held by pid {owner}, "
            f"{_of_deployment(other)}: this spec's port collides with it; not started over it, "
            "not adopted (give this spec's service another port)"
        )


async def refuse_not_listing(op: Operation, service: str, owner: int) -> None:
    """Raise :class:`~servelab.errors.ServiceStartError` when ``service``, a router found ready
    on its port that this deployment did not start, lists its workers readably and this spec's
    are not all among them."""
    missing = await router_missing(op, service)
    if missing:
        host, port = op.host(service), op.spec.service(service).port
        raise ServiceStartError(
            f"{service}: port {port} on {host.name} is held by pid {owner}, a router not started "
            f"by this deployment that does not list {', '.join(missing)}: this spec's router "
            "port is another router's; not started over it (give this spec another router port)"
        )
