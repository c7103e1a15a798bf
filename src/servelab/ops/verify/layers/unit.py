"""The service manager's layer: whether systemd loaded the service's unit as it is on disk.

A unit changed on disk and not reloaded (``NeedDaemonReload``) restarts the old command line, so an
argument knob's file value would not reach the engine. Checked for a service with a ``unit`` that
declares argument knobs.
"""

from __future__ import annotations

from servelab.core.verify.arguments import UnitState
from servelab.core.verify.checks import Check, CheckCode, Layer
from servelab.io.hosts.discovery import unit_needs_reload
from servelab.ops.verify.layers.reader import LayerReader, ReadContext

__all__ = ["UNIT"]

_C = CheckCode


async def read(ctx: ReadContext) -> list[Check]:
    """The unit's check (none without a unit or without argument knobs)."""
    unit = ctx.op.spec.service(ctx.name).unit
    if unit is None or not ctx.arguments():
        return []
    stale = await unit_needs_reload(ctx.op.host(ctx.name), unit)
    if stale is None:
        return [Check(ctx.name, False, _C.CONFIG_UNIT_UNKNOWN, UnitState(unit, None))]
    code = _C.CONFIG_UNIT_STALE if stale else _C.CONFIG_UNIT_LOADED
    return [Check(ctx.name, not stale, code, UnitState(unit, stale))]


UNIT = LayerReader("unit", Layer.CONFIG, read)
