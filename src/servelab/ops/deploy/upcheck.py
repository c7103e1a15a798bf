"""Whether the deployment is up, before a command that measures it changes anything (issue 38).

``ab`` and ``tune`` restart services for their arms and measure through the router: on a
deployment that is down (its router, or a worker, not running) they used to start a decode, wait
for a router that could never be ready, fail mid-way and leave the decode running.
:func:`refuse_not_up` probes every service's readiness path once, side by side, and raises
:class:`~servelab.core.deploy.refusals.RunRefused` carrying a
:class:`~servelab.core.deploy.refusals.NotUp` (exit 2) naming each one not ready, before anything
is started, stopped or written (``case test`` too, which restarts its arms as they do).
``bench -f SPEC`` measures only: :func:`refuse_not_serving` probes the services its load goes
through (the entry point and the workers behind it) and refuses the same way, naming each that
does not answer (down), where it said only "no answer" about its entry point. Before that
(``ab``, ``tune``, ``case test``), the processes serving the services must be this copy's: a
copy of a running spec with its own state folder runs nothing of its own, and its arms would set
its env files and restart the other copy's processes
(:func:`~servelab.ops.deploy.anothers.anothers_processes`, the check ``verify`` makes: a
``RunRefused`` carrying :class:`~servelab.core.deploy.refusals.AnothersProcesses`, exit 2).

What is down, the one place: :func:`not_ready` (each service's readiness probed in turn, 3 s at
most), :func:`still_serving` (those that answer ready now), :func:`recovery_up` (the command that
brings a deployment's stopped services back, ``servelab up -f SPEC``: what an interrupted or failed
``up``, ``restart`` and put-back name), :func:`left_down` (every service not ready, as an
interrupted restart's report: what a command stopped by a signal where no put-back ran left down,
:func:`servelab.cli.interrupted.naming_down`) and :func:`running_processes` (whose process still
runs: what an interrupted ``down`` left running, :func:`servelab.cli.interrupted.naming_stopped`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

from servelab.core.deploy.refusals import AnothersProcesses, NotUp, RunRefused
from servelab.core.deploy.spec import start_order
from servelab.core.deploy.topology import dependencies
from servelab.core.restart.contract import RestartReport
from servelab.errors import ServelabError
from servelab.io.hosts.discovery import find_process
from servelab.io.specfile import LoadedSpec
from servelab.ops.context import Operation, operation
from servelab.ops.deploy.anothers import anothers_processes
from servelab.ops.deploy.services import readiness

__all__ = [
    "READY_TIMEOUT_S",
    "left_down",
    "not_ready",
    "recovery_up",
    "refuse_not_serving",
    "refuse_not_up",
    "running_processes",
    "running_services",
    "still_serving",
]

#: Each service's readiness is waited for this long at most when reading what is down.
READY_TIMEOUT_S = 3.0


async def refuse_not_up(op: Operation, command: str) -> None:
    """Raise :class:`RunRefused` (:class:`NotUp`) unless every service of ``op``'s spec answers
    its readiness path ready, or :class:`AnothersProcesses` when another copy of this deployment
    serves them; ``command`` is the refused command's name."""
    names = list(op.spec.services)
    if held := await anothers_processes(op, names):
        raise RunRefused(AnothersProcesses(held, command))
    await _refuse_down(op, command, names)


async def refuse_not_serving(loaded: LoadedSpec, command: str) -> None:
    """Raise :class:`RunRefused` (:class:`NotUp`, ``sends_only``) when a service that load
    sent to ``loaded``'s entry point goes through gives no answer at its readiness path (down):
    the entry point (its proxy, else its router), the router behind a proxy, the prefill and
    decode workers behind a router, and what they depend on. Only HTTP probes: nothing else is
    read (``bench`` measures, changes nothing; another copy's processes serving them serve its
    load as well)."""
    spec = loaded.spec
    entry = spec.entry_point
    front = [entry, *(spec.by_role("router") if spec.service(entry).role == "proxy" else ())]
    workers = [*spec.by_role("prefill"), *spec.by_role("decode")]
    routed = any(spec.service(name).role == "router" for name in front)
    wanted = dependencies(spec, [*front, *(workers if routed else ())])
    names = [name for name in spec.services if name in wanted]  # spec order
    async with operation(loaded) as op:
        await _refuse_down(op, command, names, sends_only=True)


async def _refuse_down(
    op: Operation, command: str, names: list[str], *, sends_only: bool = False
) -> None:
    """:class:`NotUp` naming each of ``names`` whose readiness probe (one each, side by side)
    is not ready; ``sends_only``: each that gives no HTTP answer at all (down: nothing listens),
    one answering otherwise (a custom entry point without the engine's readiness path, a worker
    still loading) is left to the load's own checks, which say what it answered."""
    probes = await asyncio.gather(*(readiness(op, name) for name in names))
    down = tuple((name, found) for name, found in zip(names, probes, strict=True)
                 if (found.status is None if sends_only else not found.ok))  # fmt: skip
    if down:
        raise RunRefused(NotUp(command, down, tuple(op.loaded.spec_args), sends_only))


def recovery_up(loaded: LoadedSpec) -> list[str]:
    """The command that brings ``loaded``'s stopped services back: ``servelab up -f SPEC``."""
    return ["servelab", "up", *loaded.spec_args]


async def _ready(op: Operation, name: str) -> bool:
    """``name`` answers its readiness path ready (3 s at most); unreadable: not ready."""
    with contextlib.suppress(ServelabError, OSError):
        return (await readiness(op, name, timeout=READY_TIMEOUT_S)).ok
    return False


async def not_ready(op: Operation, names: Iterable[str]) -> list[str]:
    """Those of ``names`` (in their order) not answering their readiness ready, probed in turn."""
    return [name for name in names if not await _ready(op, name)]


async def still_serving(op: Operation, names: set[str]) -> set[str]:
    """Those of ``names`` that answer their readiness ready now (one probe each, 3 s at most): a
    restart cut before it stopped them (during a dependent's stop) left them serving, never
    "down"; a failed ``up`` that stopped one serving before it left it down. A second signal
    ends the look: the rest count as down."""
    serving: set[str] = set()
    with contextlib.suppress(asyncio.CancelledError):
        for name in sorted(names):
            if await _ready(op, name):
                serving.add(name)
    return serving


async def running_services(loaded: LoadedSpec) -> list[str]:
    """``loaded``'s services that answer their readiness ready, in start order."""
    async with Operation(loaded) as op:
        order = start_order(op.spec)
        down = set(await not_ready(op, order))
    return [name for name in order if name not in down]


async def running_processes(loaded: LoadedSpec, names: Iterable[str]) -> list[str]:
    """Those of ``names`` (in their order) whose process still runs: its pid record's, else its
    unit's, else its port's owner (a service whose host does not answer counts as running:
    nothing says it stopped). What an interrupted ``down`` left running."""
    running: list[str] = []
    async with Operation(loaded) as op:
        for name in names:
            try:
                alive = (await find_process(loaded, name, op.host(name))).pid is not None
            except (ServelabError, OSError):
                alive = True
            if alive:
                running.append(name)
    return running


async def left_down(loaded: LoadedSpec) -> RestartReport | None:
    """``loaded``'s services not ready, in start order, and the command that brings them back,
    as an interrupted restart's report; None when every service is ready."""
    async with Operation(loaded) as op:
        down = await not_ready(op, start_order(op.spec))
    if not down:
        return None
    return RestartReport(down, [], interrupted=True, error="interrupted", down=down,
                         recovery=recovery_up(loaded))  # fmt: skip
