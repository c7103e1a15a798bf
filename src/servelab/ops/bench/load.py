"""The load itself: jobs, one run's closed or open loop on one :class:`StreamClient` (or a trace's
replay, :class:`~servelab.ops.bench.replay.Replay`), the lag ticker, and the stop rule; shared by
one process (:mod:`servelab.ops.bench.bench`) and each worker process
(:mod:`servelab.ops.bench.workers`).

Every loop starts at a given ``t0`` (``perf_counter_ns()``, i.e. ``CLOCK_MONOTONIC``: one clock for
every process of the machine), so N worker processes can share one schedule.
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import groupby
from operator import itemgetter
from time import perf_counter_ns
from typing import TYPE_CHECKING

from servelab.core.load.identity import request_identity
from servelab.core.load.records import REASON_INTERRUPTED, RequestRecord, decode_chunks
from servelab.core.load.trace import TraceSession
from servelab.core.load.workload import LengthDist, generate_requests
from servelab.io.http.client import chat_body, completion_body
from servelab.io.http.stream import Chain, Outgoing, StreamClient
from servelab.io.http.transfer import Chunks

if TYPE_CHECKING:
    from servelab.ops.bench.replay import Replay, ReplayPlan

__all__ = [
    "LAG_TICK_S",
    "QUIET_NS",
    "SPIN_NS",
    "Job",
    "Load",
    "Part",
    "PartResult",
    "jobs_for",
    "lag_ticker",
    "merge",
    "run_part",
    "sleep_until",
    "slot_starts_ns",
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


#: How long before its instant a replay's request stops sleeping on a timer and yields to the
#: loop until the instant comes (the loop's timers are a millisecond coarse, early or late).
SPIN_NS = 1_500_000
#: A replay's heavy work (building a body, decoding one) waits while a request is due this soon.
QUIET_NS = 2_000_000


async def sleep_until(when_ns: int, spin_ns: int = 0) -> None:
    """Sleep until ``perf_counter_ns()`` reaches ``when_ns``, never waking before it (a loop's
    timers may fire up to a millisecond early); the last ``spin_ns`` not on a timer but
    yielding to the loop's other work until the instant (sub-millisecond, at a little CPU)."""
    while (delay := when_ns - perf_counter_ns()) > spin_ns:
        await asyncio.sleep((delay - spin_ns) / 1e9)
    while perf_counter_ns() < when_ns:
        await asyncio.sleep(0)


@dataclass(frozen=True, slots=True)
class Job:
    """One request to send: its place in the run, its prompt's length, its body, and (a turn
    of a replayed conversation) the conversation's ordinal."""

    index: int
    input_len: int
    body: bytes
    session: int | None = None


def jobs_for(
    n: int,
    seed: int,
    *,
    input_len: LengthDist,
    output_len: LengthDist,
    shared_prefix_len: int,
    model: str,
    endpoint: str,
    ignore_eos: bool,
) -> list[Job]:
    """The ``n`` requests of one run (or warm-up), bodies serialised once."""
    specs = generate_requests(
        n,
        input_len=input_len,
        output_len=output_len,
        seed=seed,
        shared_prefix_len=shared_prefix_len,
    )
    make = chat_body if "chat" in endpoint else completion_body
    return [
        Job(s.index, s.input_len, make(model, s.prompt, s.output_len, ignore_eos=ignore_eos))
        for s in specs
    ]


class Load:
    """One run's moving parts: the client, the jobs, the deadline, the records."""

    def __init__(
        self,
        client: StreamClient,
        endpoint: str,
        on_done: Callable[[RequestRecord], None],
        deadline_ns: int | None,
        trace_tag: str = "",
        decode_each: bool = False,
        keep: frozenset[int] = frozenset(),
    ) -> None:
        self.client = client
        self.trace_tag = trace_tag
        self.endpoint = endpoint
        self.on_done = on_done
        self.deadline_ns = deadline_ns
        self.records: list[RequestRecord] = []  # every request sent (appended at its send)
        self.finished = 0  # requests that ended (what progress reports: it reaches the total once)
        #: Decode each body as its request ends instead of after the run (a replayed trace: what
        #: is kept stays the records, not every read of every body).
        self.decode_each = decode_each
        #: The jobs whose whole bodies are kept (answer probes: what they were answered).
        self.keep = keep
        self.bodies: dict[int, bytes] = {}
        self._captured: dict[int, tuple[RequestRecord, Chunks]] = {}
        self._ready: dict[int, tuple[bytes, str, str]] = {}
        self._due: list[int] = []  # a replay's instants waited for (a heap; see _quiet)
        self._done_due: Counter[int] = Counter()

    def prepare(self, jobs: Sequence[Job]) -> None:
        """Build every job's request bytes and identity ahead of the run (before t0), so a send
        is a write, not a serialisation."""
        for job in jobs:
            self._ready[job.index] = self._build(job)

    def _build(self, job: Job) -> tuple[bytes, str, str]:
        rid, parent = request_identity(self.trace_tag, job.index) if self.trace_tag else ("", "")
        return self.client.request_bytes(self.endpoint, job.body, rid, parent), rid, parent

    def decode(self) -> None:
        """Decode every captured body (after the run: no decoding competes with reading)."""
        for record, chunks in self._captured.values():
            self._keep(record, chunks)
            decode_chunks(record, chunks, record.end_ns or perf_counter_ns())
        self._captured = {}

    def _keep(self, record: RequestRecord, chunks: Chunks) -> None:
        if record.index in self.keep:
            self.bodies[record.index] = b"".join(data for _t, data in chunks)

    def _late(self) -> bool:
        return self.deadline_ns is not None and perf_counter_ns() >= self.deadline_ns

    async def _wait(self, when_ns: int, spin_ns: int = 0) -> bool:
        """Sleep until ``when_ns``, or the deadline if it comes first; False when it did."""
        if self.deadline_ns is not None and self.deadline_ns < when_ns:
            await sleep_until(self.deadline_ns)
            return False
        await sleep_until(when_ns, spin_ns)
        return not self._late()

    async def _due_at(self, when_ns: int) -> bool:
        """A replay's request waiting for its instant: known as due (:meth:`_quiet`) until it
        is sent; False when the deadline came first."""
        heapq.heappush(self._due, when_ns)
        try:
            return await self._wait(when_ns, SPIN_NS)
        finally:
            self._done_due[when_ns] += 1

    async def _quiet(self) -> None:
        """Heavy work goes between a replay's instants: yield while a request is due within
        :data:`QUIET_NS` (until it has gone)."""
        due, done = self._due, self._done_due
        while due:
            if done[due[0]]:
                done[due[0]] -= 1
                heapq.heappop(due)
            elif due[0] - perf_counter_ns() < QUIET_NS:
                await asyncio.sleep(0)
            else:
                return

    def _outgoing(self, job: Job, scheduled_ns: int, warmup: bool) -> Outgoing:
        """Job's record (appended at its send) and its prepared bytes."""
        record = RequestRecord(job.index, scheduled_ns, input_tokens=job.input_len, warmup=warmup,
                               session=job.session)  # fmt: skip
        ready = self._ready.pop(job.index, None) or self._build(job)
        request, record.request_id, record.traceparent = ready  # x-request-id, traceparent
        self.records.append(record)
        chunks: Chunks = []
        self._captured[job.index] = (record, chunks)
        return Outgoing(self.endpoint, request, record, chunks)

    async def _send(self, out: Outgoing, chain: Chain | None = None) -> RequestRecord:
        await self.client.send(out, deadline_ns=self.deadline_ns, chain=chain)
        self.finished += 1
        if self.decode_each:
            await self._quiet()
            record, chunks = self._captured.pop(out.record.index)
            self._keep(record, chunks)
            decode_chunks(record, chunks, record.end_ns or perf_counter_ns())
        self.on_done(out.record)
        return out.record

    def _first(
        self, following: Callable[[int], Outgoing | None], scheduled: int
    ) -> tuple[Chain, Outgoing | None]:
        """A closed-loop user's first request, written now (every write of one instant goes
        before any task is created)."""
        chain = Chain(following)
        out = following(scheduled)
        if out is not None:
            self.client.launch(chain, out)
        return chain, out

    async def closed(
        self,
        jobs: list[Job],
        starts_ns: Sequence[int],
        warmup: bool = False,
        t0: int | None = None,
    ) -> None:
        """One slot per entry of ``starts_ns``: it sends its first job ``starts_ns[i]`` after
        ``t0`` (default: now), then its next job the instant its previous one ends. Every send is
        written without a task wake-up (:class:`~servelab.io.http.stream.Chain`): the first ones
        from
        this scheduler at their instant, the next ones from the read that ended the previous."""
        queue: Iterator[Job] = iter(jobs)
        self.prepare(jobs)
        t0 = perf_counter_ns() if t0 is None else t0

        def following(end_ns: int) -> Outgoing | None:
            job = None if self._late() else next(queue, None)
            return None if job is None else self._outgoing(job, end_ns, warmup)

        async def slot(chain: Chain, out: Outgoing | None) -> None:
            try:
                while out is not None:
                    record = await self._send(out, chain)
                    out = chain.take() or following(record.end_ns or perf_counter_ns())
            finally:
                self.client.drop(chain)

        tasks: list[asyncio.Task[None]] = []
        chains: list[Chain] = []
        try:
            for start, same in groupby(sorted(starts_ns)):
                await sleep_until(t0 + start)
                firsts = [self._first(following, t0 + start) for _ in same]
                chains += [chain for chain, _out in firsts]
                tasks += [asyncio.create_task(slot(*first)) for first in firsts if first[1]]
            await asyncio.gather(*tasks)
        finally:
            await self._cut(tasks, chains)

    async def open(
        self, jobs: list[Job], concurrency: int, offsets: list[int], t0: int | None = None
    ) -> None:
        """Send job i at t0 (default: now) + offsets[i]; at most ``concurrency`` in flight (the
        wait for a slot is dispatch delay, inside the measured latency). A job with a free slot
        is written from this scheduler at its instant, before its task starts."""
        gate = asyncio.Semaphore(concurrency)
        tasks: list[asyncio.Task[None]] = []
        chains: list[Chain] = []
        self.prepare(jobs)
        t0 = perf_counter_ns() if t0 is None else t0

        async def one(job: Job, scheduled: int, sent: tuple[Chain, Outgoing] | None) -> None:
            if sent is None:
                async with gate:
                    await self._send(self._outgoing(job, scheduled, False))
                return
            chain, out = sent
            try:
                await self._send(out, chain)  # adopted if it was written
            finally:
                self.client.drop(chain)
                gate.release()

        try:
            for job, offset in zip(jobs, offsets, strict=True):
                if not await self._wait(t0 + offset):
                    break
                sent = None
                if not gate.locked():
                    await gate.acquire()  # free: no wait
                    sent = (Chain(_no_next), self._outgoing(job, t0 + offset, False))
                    self.client.launch(*sent)
                    chains.append(sent[0])
                tasks.append(asyncio.create_task(one(job, t0 + offset, sent)))
            await asyncio.gather(*tasks)
        finally:
            await self._cut(tasks, chains)

    async def replay(self, plan: Replay, t0: int | None = None) -> None:
        """Start each conversation of ``plan`` at t0 (default: now) + its offset, its first
        request written from this scheduler at its instant; each later turn goes its recorded
        delay after the answer before it (its scheduled time).

        Every request's bytes are built before its instant: the starts of one instant (a burst:
        a real trace records many on one whole second) all together, with as many kept-alive
        connections opened ahead as the burst has requests, while waiting for it, so the burst's
        requests are written one after the other at the instant, none behind another's prompt,
        serialisation or connect; a later turn's while the turn before it is answered."""
        tasks: set[asyncio.Task[None]] = set()
        t0 = perf_counter_ns() if t0 is None else t0
        try:
            for offset, burst in _instants(plan.sessions):
                await self._quiet()
                jobs = await plan.first_jobs(burst, self)
                await self.client.connect(len(burst))
                if not await self._due_at(t0 + offset):
                    break
                firsts = [self._launch(job, t0 + offset) for job in jobs]
                for session, first in zip(burst, firsts, strict=True):
                    task = asyncio.create_task(self._conversation(plan, session, first))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
            await asyncio.gather(*tasks)
        finally:
            await self._cut(list(tasks), [])

    def _launch(self, job: Job, scheduled: int) -> tuple[Chain, Outgoing]:
        """``job``'s record, its request written now when a kept-alive connection is idle."""
        chain, out = Chain(_no_next), self._outgoing(job, scheduled, False)
        self.client.launch(chain, out)
        return chain, out

    async def _conversation(
        self, plan: Replay, session: TraceSession, first: tuple[Chain, Outgoing]
    ) -> None:
        chain, out = first
        for k in range(1, len(session.turns) + 1):
            job = None
            if k < len(session.turns):
                await self._quiet()
                job = plan.job(session, k, self)
            try:
                record = await self._send(out, chain)
            finally:
                self.client.drop(chain)
            if job is None:
                return
            scheduled = record.end_ns or perf_counter_ns()
            scheduled += round(session.turns[k].delay_ms * 1e6 / plan.speedup)
            if not await self._due_at(scheduled):
                return
            chain, out = self._launch(job, scheduled)

    async def _cut(self, tasks: list[asyncio.Task[None]], chains: list[Chain]) -> None:
        """The loop ended (done, failed or cancelled): stop every task; a request written for a
        task that never ran is cut, and any record left open is marked interrupted."""
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for chain in chains:
            self.client.drop(chain)
        for record in self.records:
            if record.end_ns is None:
                record.fail(REASON_INTERRUPTED, "cancelled before it was sent")
                record.end_ns = perf_counter_ns()


def _instants(
    sessions: Iterator[tuple[int, TraceSession]],
) -> Iterator[tuple[int, list[TraceSession]]]:
    """The conversations that start at one instant, together, in the trace's order (read
    lazily: one instant ahead)."""
    for offset, group in groupby(sessions, key=itemgetter(0)):
        yield offset, [session for _, session in group]


def _no_next(_end_ns: int) -> Outgoing | None:
    """An open-loop request has no follower: the schedule sends the next."""
    return None


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


def slot_starts_ns(concurrency: int, ramp_ns: int) -> list[int]:
    """Slot i of C sends its first request ``i * ramp_ns / C`` after t0."""
    return [i * ramp_ns // concurrency for i in range(concurrency)]


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
                part.trace_tag, decode_each=part.replay is not None, keep=part.keep)  # fmt: skip
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
