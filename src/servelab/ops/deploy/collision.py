"""``up`` over a port another deployment serves (issue 38, sixteenth pass H1): a spec whose port
is another live deployment's is never "already up" there.

The process holding a service's port that carries ANOTHER deployment's mark
(:func:`~servelab.io.hosts.discovery.others_mark`) fails the step, naming that deployment, the
pid and the port. A router that cannot be told (no mark, or its environment unreadable or written
over, as the real sglang-router writes over its own) is kept as "already up, not started by
servelab" (a user's own router the spec points at), unless its worker list, when it can be read,
lists another's workers and lacks some of this spec's: then it serves another set of workers and
the step fails. A router listing no worker but this spec's, and not all of them (none: the real
sglang-router and smg start with no worker, and workers are added later with ``POST /workers``),
is no proof of another deployment, nor is one whose list cannot be read: it is left up with a
warning that whose it is cannot be told (:class:`~servelab.core.deploy.events.RouterUntold`). Each
refusal is typed (:class:`~servelab.core.deploy.refusals.PortRefused`), worded in
:mod:`servelab.report.refusals`.
"""

from __future__ import annotations

from servelab.core.deploy.events import RouterUntold
from servelab.core.deploy.refusals import PortHeld, PortRefused, RouterNotListing
from servelab.io.hosts.discovery import others_mark
from servelab.io.hosts.processes import spec_mark
from servelab.ops.context import Operation
from servelab.ops.verify.verify import router_listing

__all__ = ["refuse_foreign", "refuse_not_listing", "routes_for_another"]


async def refuse_foreign(op: Operation, service: str, owner: int) -> None:
    """Raise :class:`~servelab.core.deploy.refusals.PortRefused` when ``owner``, the process
    holding ``service``'s port, carries another deployment's mark."""
    host, port = op.host(service), op.spec.service(service).port
    other = await others_mark(host, owner, spec_mark(op.loaded, service))
    if other is not None:
        raise PortRefused(PortHeld(service, port, host.name, owner, other))


def routes_for_another(listing: tuple[tuple[str, ...], tuple[str, ...]] | None) -> bool:
    """Whether a router's worker list (:func:`~servelab.ops.verify.verify.router_listing`: the
    spec's workers it lacks, the URLs it lists that are none of the spec's) is another
    deployment's: it lists another's workers and lacks some of this spec's. One listing none, or
    only some of this spec's, may be a router workers register with later."""
    return listing is not None and bool(listing[0]) and bool(listing[1])


async def refuse_not_listing(op: Operation, service: str, owner: int) -> RouterUntold | None:
    """Raise :class:`~servelab.core.deploy.refusals.PortRefused` when ``service``, a router found
    ready on its port that this deployment did not start, lists another's workers and not all of
    this spec's; else why whose it is cannot be told (its list unreadable; or it lists only some
    of this spec's, or none: a router workers register with later), None when it lists them
    all."""
    listing = await router_listing(op, service)
    if listing is None:
        return RouterUntold(None)
    missing, _ = listing
    if routes_for_another(listing):
        host, port = op.host(service), op.spec.service(service).port
        raise PortRefused(RouterNotListing(service, port, host.name, owner, missing))
    return RouterUntold(missing) if missing else None
