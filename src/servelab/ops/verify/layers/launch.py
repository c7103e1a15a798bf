"""The router's launch layer: was the running router launched with the settings its spec gives
now? (issue 38, the nineteenth pass's M4.)

A router reads its table (``[services.NAME.router]``: policy, intervals, timeouts, its workers,
``extra_args``) at start only, and writes its title over its own argv, so an edited table is
invisible live. Its pid record keeps the command line it was launched with: that is compared,
setting by setting, with the one the spec would launch now
(:func:`servelab.ops.routerlaunch.router_launch`): ``live.router_restart_needed`` names each
setting that differs (spec vs live), ``live.router_as_spec`` passes. No check for a service that
is not a ``start = "router"`` router, nor for a router servelab holds no live record of (the
process layer says whether it runs).
"""

from __future__ import annotations

from servelab.core.verify.checks import Check, CheckCode, Layer
from servelab.ops.routerlaunch import router_launch
from servelab.ops.verify.layers.reader import LayerReader, ReadContext

__all__ = ["LAUNCH"]

_C = CheckCode


async def read(ctx: ReadContext) -> list[Check]:
    """The router's launch check (none for another service, or a router not recorded alive)."""
    found = await router_launch(ctx.op, ctx.name)
    if found is None:
        return []
    if found.changes:
        return [Check(ctx.name, False, _C.LIVE_ROUTER_RESTART_NEEDED, found)]
    return [Check(ctx.name, True, _C.LIVE_ROUTER_AS_SPEC, found)]


LAUNCH = LayerReader("launch", Layer.LIVE, read)
