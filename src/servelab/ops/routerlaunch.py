"""Whether a running router servelab launched runs as the spec says now (issue 38, the nineteenth
pass's M4): its pid record's ``argv`` (what it was launched with) against the command line the
spec would launch (:func:`~servelab.core.deploy.relaunch.router_changes`, the one rule).

Read by ``verify``'s live layer (:mod:`servelab.ops.verify.layers.launch`) and by ``up`` on a
router found already up (a warning naming ``servelab restart``): an edited router table changes
nothing until the router restarts, and a router writes its title over its own argv, so its pid
record is the only place its launch settings are kept.
"""

from __future__ import annotations

from servelab.core.deploy.relaunch import launched_argv, router_changes
from servelab.core.verify.checks import RouterLaunch
from servelab.io.hosts.ownrecord import read_own_record
from servelab.io.hosts.processes import is_alive, spec_mark
from servelab.ops.context import Operation

__all__ = ["router_launch"]


async def router_launch(op: Operation, service: str) -> RouterLaunch | None:
    """The settings ``service`` (a ``start = "router"`` service) runs otherwise than the spec
    says; None when it is no such service, or servelab holds no live record of it with its
    command line (not running, another deployment's, not launched by servelab, a record whose
    ``argv`` is no list of words): then nothing is known of what it was launched with."""
    if op.spec.service(service).start != "router":
        return None
    host = op.host(service)
    own = await read_own_record(host, op.loaded.state_dir, service, spec_mark(op.loaded, service))
    record = own.record
    argv = None if record is None else launched_argv(record.argv)
    if record is None or argv is None or not await is_alive(host, record):
        return None
    return RouterLaunch(record.pid, tuple(router_changes(op.spec, service, argv)))
