"""The config and live layers of a service's argument knobs (``--max-running-requests``), and of
its systemd unit: what :mod:`servelab.core.verify.arguments` compares, read on the service's host.

- **config**: each argument knob's file value, the place it comes from and the places it
  overrides (:func:`servelab.ops.arguments.read_places`), against the spec's pin; for a service
  with a ``unit``, whether systemd loaded the unit file as it is on disk (``NeedDaemonReload``).
- **live**: the process's own command line (``/proc/PID/cmdline``, ``--config`` merged under it)
  and what the engine reports (``/server_info``, read once per service), against the file.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from servelab.core.knobs.knob import Knob, same_value
from servelab.core.knobs.places import FileValue, LiveSource, LiveValue
from servelab.core.verify.arguments import (
    ArgumentInFile,
    ArgumentLive,
    Overridden,
    UnitState,
    argument_verdict,
)
from servelab.core.verify.checks import Check, CheckCode, Layer
from servelab.io.hosts.discovery import unit_needs_reload
from servelab.ops.arguments import (
    argument_knob,
    engine_arguments,
    live_argument,
    place_path,
    read_places,
)
from servelab.ops.context import Operation

__all__ = ["argument_knobs", "argument_layers"]

_C = CheckCode


def argument_knobs(op: Operation, service: str) -> list[Knob]:
    """The service's declared argument knobs (its env knobs are the env file's to check)."""
    knobs = [argument_knob(op, name) for name in op.spec.service(service).knobs]
    return [knob for knob in knobs if not knob.is_env]


async def argument_layers(
    op: Operation,
    service: str,
    layers: Sequence[Layer],
    knobs: list[Knob],
    routed: asyncio.Event | None = None,
) -> list[Check]:
    """The config checks (one per knob, and the unit's) and the live checks of ``knobs``; a
    router's live checks after ``routed`` is set (the e2e probe's request routed: a router reports
    its policy only once it has routed one)."""
    files = {knob.name: await read_places(op, service, knob) for knob in knobs}
    checks = []
    if Layer.CONFIG in layers:
        checks += [_in_file(op, service, knob, files[knob.name]) for knob in knobs]
        checks += await _unit(op, service)
    if Layer.LIVE in layers:
        checks += await _live(op, service, knobs, files, routed)
    return checks


def _in_file(op: Operation, service: str, knob: Knob, now: FileValue) -> Check:
    pin = knob.normalize(op.spec.service(service).knobs.get(knob.name))
    if pin is None:
        ok, code = True, _C.CONFIG_ARGUMENT_NOT_PINNED
    else:
        ok = same_value(now.value, pin)
        code = _C.CONFIG_ARGUMENT_MATCHES_SPEC if ok else _C.CONFIG_ARGUMENT_PIN_MISMATCH
    place = None if now.place is None else str(now.place)
    path = None if now.place is None else place_path(op, service, now.place)
    hidden = tuple(Overridden(str(where), value) for where, value in now.shadowed)
    return Check(service, ok, code, ArgumentInFile(knob.name, now.value, place, path, pin, hidden))


async def _unit(op: Operation, service: str) -> list[Check]:
    unit = op.spec.service(service).unit
    if unit is None:
        return []
    stale = await unit_needs_reload(op.host(service), unit)
    if stale is None:
        return [Check(service, False, _C.CONFIG_UNIT_UNKNOWN, UnitState(unit, None))]
    code = _C.CONFIG_UNIT_STALE if stale else _C.CONFIG_UNIT_LOADED
    return [Check(service, not stale, code, UnitState(unit, stale))]


async def _live(
    op: Operation,
    service: str,
    knobs: list[Knob],
    files: dict[str, FileValue],
    routed: asyncio.Event | None,
) -> list[Check]:
    proc, live = await live_argument(op, service, knobs)
    if proc.pid is None:
        return []  # the env layer already says that no process serves the service
    router = op.spec.service(service).role == "router"
    if router and routed is not None:
        await routed.wait()
    engine = await engine_arguments(op, service, knobs)
    checks = []
    for knob in knobs:
        file, got, said = files[knob.name].value, live[knob.name], engine[knob.name]
        if router and got.source is LiveSource.DEFAULT and said.known:
            got = LiveValue(said.value, LiveSource.REPORTED)  # its argv is written over
        verdict = argument_verdict(file, got.value, said.value, said.known)
        data = ArgumentLive(
            proc.pid, proc.source, knob.name, file, got.value, str(got.source), verdict.verdict,
            engine_known=said.known, engine=said.value, engine_field=said.where or None,
        )  # fmt: skip
        checks.append(Check(service, verdict.ok, _C.of_argument(verdict), data))
    return checks
