"""One process's share of one run: what it drives (:class:`Part`: its jobs, its schedule from one
``t0``, its deadline), running it (:func:`run_part`: the loop of :mod:`servelab.ops.bench.load`
with the event-loop lag ticker, the stop event, no GC pauses, the decode after), what it measured
(:class:`PartResult`), and a run dealt to N worker processes and merged back (:func:`split`,
:func:`merge`; the processes are :mod:`servelab.ops.bench.workers`)."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from time import perf_counter_ns

from servelab.core.load.records import RequestRecord
from servelab.io.http.stream import StreamClient
from servelab.ops.bench.jobs import Job
from servelab.ops.bench.load import Load
from servelab.ops.bench.replay import Replay, ReplayPlan

__all__ = [
    "LAG_TICK_S",
    "Part",
    "PartResult",
    "lag_ticker",
    "merge",
    "run_part",
    "split",
    "until_stopped",
]

#: How often the event-loop lag ticker samples (its thresholds:
# :mod:`servelab.core.load.clienthealth`).
LAG_TICK_S = 0.02


async def lag_ticker(samples: list[float]) -> None:
    loop = asyncio.get_running_loop()
    due = loop.time() + LAG_TICK_S
    while True:
        await asyncio.sleep(max(due - loop.time(), 0.0))
        now = loop.time()
        samples.append(max(now - due, 0.0))
        due = now + LAG_TICK_S


async def until_stopped(work: asyncio.Task[None], stop: asyncio.Event | None) -> bool:
    """Await ``work``; if ``stop`` is set first, cancel it. True when stopped."""
    if stop is None:
        await work
        return False
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if work.done():
        work.result()
        return False
    work.cancel()
    await asyncio.gather(work, return_exceptions=True)
    return True


@dataclass(frozen=True, slots=True)
class Part:
    """What one process drives in one run: its jobs and when they go.

    Closed loop: one slot per ``starts_ns`` entry (its first send after ``t0_ns``); open loop
    (``offsets_ns`` set): job i at ``t0_ns + offsets_ns[i]``, at most ``cap`` in flight.
    ``t0_ns`` None: the part starts when it is run.
    """

    jobs: list[Job]
    endpoint: str
    starts_ns: tuple[int, ...] = ()
    offsets_ns: tuple[int, ...] | None = None
    cap: int = 1
    t0_ns: int | None = None
    deadline_ns: int | None = None
    warmup: bool = False
    #: 16 hex digits: every request gets its ``x-request-id`` and ``traceparent`` from it
    #: (:func:`~servelab.core.load.identity.request_identity`); empty: no identity headers.
    trace_tag: str = ""
    #: A trace replayed instead of ``jobs`` (read as it goes); ``replay_plan``: the same as
    #: data, what a worker process builds its share's replay from (:func:`split`).
    replay: Replay | None = None
    replay_plan: ReplayPlan | None = None
    #: The jobs (by index) whose whole bodies come back (:attr:`PartResult.bodies`): probes.
    keep: frozenset[int] = frozenset()
    #: A replay's last wait before each instant asleep on a kernel timer, not spinning: the
    #: client's processes would hold every core (:func:`servelab.ops.bench.workers.spare_core`).
    asleep: bool = False


@dataclass(slots=True)
class PartResult:
    """What one process measured in one run (bodies decoded, the decoding's CPU counted)."""

    records: list[RequestRecord]
    cpu_s: float
    run_cpu_s: float
    wall_s: float
    lag_s: list[float]
    stopped: bool
    setups_ns: list[int]
    #: The kept jobs' whole bodies, by job index (:attr:`Part.keep`).
    bodies: dict[int, bytes] = field(default_factory=dict)
    #: A replay's conversation ids by ordinal (:attr:`Replay.names`).
    names: dict[int, str] = field(default_factory=dict)


async def run_part(
    client: StreamClient,
    part: Part,
    stop: asyncio.Event | None,
    on_done: Callable[[RequestRecord], None] | None = None,
) -> PartResult:
    """Drive ``part`` on ``client`` until done (or ``stop``), then decode what it received."""
    load = Load(client, part.endpoint, on_done or (lambda _r: None), part.deadline_ns,
                part.trace_tag, decode_each=part.replay is not None, keep=part.keep,
                asleep=part.asleep)  # fmt: skip
    lag: list[float] = []
    ticker = asyncio.create_task(lag_ticker(lag))
    setups0 = len(client.setups_ns)
    cpu0, wall0 = time.process_time(), perf_counter_ns()
    if part.replay is not None:
        work = load.replay(part.replay, part.t0_ns)
    elif part.offsets_ns is None:
        work = load.closed(part.jobs, part.starts_ns, part.warmup, part.t0_ns)
    else:
        work = load.open(part.jobs, part.cap, list(part.offsets_ns), part.t0_ns)
    with _no_gc_pauses():
        try:
            stopped = await until_stopped(asyncio.create_task(work), stop)
        finally:
            ticker.cancel()
        end = perf_counter_ns()
        run_cpu = time.process_time() - cpu0
        load.decode()  # its CPU counts: client CPU per token includes decoding
    start = wall0 if part.t0_ns is None else max(part.t0_ns, wall0)
    return PartResult(
        records=load.records,
        cpu_s=time.process_time() - cpu0,
        run_cpu_s=run_cpu,
        wall_s=(end - start) / 1e9,
        lag_s=lag,
        stopped=stopped,
        setups_ns=client.setups_ns[setups0:],
        bodies=load.bodies,
        names={} if part.replay is None else part.replay.names,
    )


@contextmanager
def _no_gc_pauses() -> Iterator[None]:
    """No cyclic garbage collection during a run and its decode: the stamped reads it keeps (a
    tuple and a bytes object per read, ~10^5 a run) would be scanned again and again, about 6%
    of the run's CPU in a C256 profile (docs/bench.md); the run makes little cyclic garbage, and
    what it makes is collected once it ends (reference counting frees the rest as it goes)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def merge(parts: Sequence[PartResult]) -> PartResult:
    """The parts of one run as one: records in index order; CPU summed (``run_cpu_s``: the
    busiest process's, what one core held); the longest wall; every lag sample."""
    return PartResult(
        records=sorted((r for p in parts for r in p.records), key=lambda r: r.index),
        cpu_s=sum(p.cpu_s for p in parts),
        run_cpu_s=max(p.run_cpu_s for p in parts),
        wall_s=max(p.wall_s for p in parts),
        lag_s=[x for p in parts for x in p.lag_s],
        stopped=any(p.stopped for p in parts),
        setups_ns=[x for p in parts for x in p.setups_ns],
        bodies={k: v for p in parts for k, v in p.bodies.items()},
        names={k: v for p in parts for k, v in p.names.items()},
    )


def split(part: Part, n: int) -> list[Part]:
    """``part`` dealt to ``n`` processes sharing its ``t0_ns``: closed loop, slot i to process
    i mod n and job j to the process of slot j mod C (shares in proportion to slots); open loop,
    job j (and its offset) to process j mod n, the in-flight cap split alike; a trace, its
    conversations dealt in turn (``share`` of ``shares``: each process builds its replay)."""
    if part.replay_plan is not None:
        plan = part.replay_plan
        return [replace(part, replay=None, replay_plan=replace(plan, share=w, shares=n))
                for w in range(n)]  # fmt: skip
    if part.offsets_ns is None:
        slots = len(part.starts_ns)
        return [
            replace(
                part,
                jobs=[j for k, j in enumerate(part.jobs) if (k % slots) % n == w],
                starts_ns=part.starts_ns[w::n],
            )
            for w in range(n)
        ]
    return [
        replace(
            part,
            jobs=part.jobs[w::n],
            offsets_ns=part.offsets_ns[w::n],
            cap=part.cap // n + (w < part.cap % n),
        )
        for w in range(n)
    ]
