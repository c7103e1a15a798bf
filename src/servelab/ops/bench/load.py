"""The load loops: one run's closed or open loop on one :class:`StreamClient`, or a trace's replay
(:class:`~servelab.ops.bench.replay.Replay`) at its recorded instants, each request's bytes built
ahead of its send; shared by one process and each worker process through
:func:`servelab.ops.bench.part.run_part`. The jobs they send are :mod:`servelab.ops.bench.jobs`.

Every loop starts at a given ``t0`` (``perf_counter_ns()``, i.e. ``CLOCK_MONOTONIC``: one clock for
every process of the machine), so N worker processes can share one schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from itertools import groupby
from operator import itemgetter
from time import perf_counter_ns
from typing import TYPE_CHECKING

from servelab.core.load.identity import request_identity
from servelab.core.load.records import REASON_INTERRUPTED, RequestRecord, decode_chunks
from servelab.core.load.trace import TraceSession
from servelab.io import instant
from servelab.io.http.stream import Chain, Outgoing, StreamClient
from servelab.io.http.transfer import Chunks
from servelab.ops.bench.jobs import Job

if TYPE_CHECKING:  # the replay builds its jobs for a Load: it imports this module
    from servelab.ops.bench.replay import Replay

__all__ = ["HELD_NS", "QUIET_NS", "SPIN_NS", "Load", "sleep_until", "slot_starts_ns"]

#: How long before its instant a replay's request stops sleeping on the loop's timers (a
#: millisecond coarse, early or late) and yields to the loop until the instant comes, or
#: waits asleep on a kernel timer armed at it (``asleep``: client processes on every core).
SPIN_NS = 1_500_000
#: A replay's heavy work (building a body, decoding one) waits while a request is due this soon.
QUIET_NS = 2_000_000
#: How long a burst's requests are written ahead of ordinary processes at a stretch
#: (:meth:`Load._launch_burst`): a burst of 4,096 written in one would hold a core for a tenth
#: of a second; between two stretches the thread is ordinary again (the kernel runs what waits).
HELD_NS = 2_000_000


async def sleep_until(
    when_ns: int, spin_ns: int = 0, asleep: bool = False, hold: contextlib.ExitStack | None = None
) -> None:
    """Sleep until ``perf_counter_ns()`` reaches ``when_ns``, never waking before it (a loop's
    timers may fire up to a millisecond early); the last ``spin_ns`` yielding to the loop's other
    work until the instant (sub-millisecond, at a core held), or with ``asleep`` on a kernel
    timer armed at the instant itself (:func:`servelab.io.instant.wait_until`; a spin where
    there is none): what client processes that would hold every core do. With ``hold`` that
    timer's wait alone is held (:func:`servelab.io.instant.held`, asleep: no core taken), and
    stays held in ``hold`` once it fired (a spin never is)."""
    while (delay := when_ns - perf_counter_ns()) > spin_ns:
        await asyncio.sleep((delay - spin_ns) / 1e9)
    if spin_ns and asleep and instant.available():
        try:
            if hold is not None:
                hold.enter_context(instant.held())
            await instant.wait_until(when_ns)
        except OSError:  # no descriptor left (EMFILE): the spin below, not held
            if hold is not None:
                hold.close()
    while perf_counter_ns() < when_ns:
        await asyncio.sleep(0)


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
        asleep: bool = False,
    ) -> None:
        self.client = client
        #: A replay's last wait before an instant asleep, not spinning (:func:`sleep_until`).
        self.asleep = asleep
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
        #: each job's ``max_tokens`` when known: the bound of the usage its answer reports
        self._max_tokens: dict[int, int] = {}
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
            self._decode(record, chunks)
        self._captured = {}

    def _decode(self, record: RequestRecord, chunks: Chunks) -> None:
        limit = self._max_tokens.pop(record.index, None)
        decode_chunks(record, chunks, record.end_ns or perf_counter_ns(), limit)

    def _keep(self, record: RequestRecord, chunks: Chunks) -> None:
        if record.index in self.keep:
            self.bodies[record.index] = b"".join(data for _t, data in chunks)

    def _late(self) -> bool:
        return self.deadline_ns is not None and perf_counter_ns() >= self.deadline_ns

    async def _wait(
        self, when_ns: int, spin_ns: int = 0, hold: contextlib.ExitStack | None = None
    ) -> bool:
        """Sleep until ``when_ns``, or the deadline if it comes first; False when it did."""
        if self.deadline_ns is not None and self.deadline_ns < when_ns:
            await sleep_until(self.deadline_ns)
            return False
        await sleep_until(when_ns, spin_ns, self.asleep, hold)
        return not self._late()

    async def _due_at(self, when_ns: int, hold: contextlib.ExitStack | None = None) -> bool:
        """A replay's request waiting for its instant: known as due (:meth:`_quiet`) until it
        is sent; False when the deadline came first."""
        heapq.heappush(self._due, when_ns)
        try:
            return await self._wait(when_ns, SPIN_NS, hold)
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
        if job.max_tokens is not None:
            self._max_tokens[job.index] = job.max_tokens
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
            self._decode(record, chunks)
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
        """Start each conversation of ``plan`` at t0 (default: the moment its first instant's
        requests are ready) + its offset, its first request written from this scheduler at its
        instant; each later turn goes its recorded delay after the answer before it (its
        scheduled time).

        Every request's bytes are built before its instant: the starts of one instant (a burst:
        a real trace records many on one whole second) all together, with as many kept-alive
        connections opened ahead as the burst has requests, while waiting for it, so the burst's
        requests are written one after the other at the instant, none behind another's prompt,
        serialisation or connect (and ahead of ordinary processes where permitted,
        :func:`servelab.io.instant.held`: each write wakes the server, which would otherwise
        often take the writer's core between two of them); a later turn's while the turn before
        it is answered. The first instant's are built before the clock starts: without ``t0``
        the clock starts once they are ready (the first instant is at offset 0, so they would
        otherwise be built on its time: a whole first burst late by its building, ~3 ms for ten
        2,400-token prompts)."""
        tasks: set[asyncio.Task[None]] = set()
        instants = _instants(plan.sessions)
        try:
            ready = await self._burst(plan, next(instants, None))
            if self.asleep:
                instant.available()  # libc's timerfd looked up before the clock starts
            t0 = perf_counter_ns() if t0 is None else t0
            while ready is not None:
                offset, burst, jobs = ready
                firsts = await self._at_instant(jobs, t0 + offset)
                if firsts is None:
                    break
                for session, first in zip(burst, firsts, strict=True):
                    task = asyncio.create_task(self._conversation(plan, session, first))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                ready = await self._burst(plan, next(instants, None))
            await asyncio.gather(*tasks)
        finally:
            await self._cut(list(tasks), [])

    async def _burst(
        self, plan: Replay, instant: tuple[int, list[TraceSession]] | None
    ) -> tuple[int, list[TraceSession], list[Job]] | None:
        """One instant's conversations (None: none left) with their first requests built and as
        many kept-alive connections opened, between the instants (:meth:`_quiet`)."""
        if instant is None:
            return None
        offset, burst = instant
        await self._quiet()
        jobs = await plan.first_jobs(burst, self)
        await self.client.connect(len(burst))
        return offset, burst, jobs

    async def _at_instant(
        self, jobs: list[Job], when_ns: int
    ) -> list[tuple[Chain, Outgoing]] | None:
        """``jobs`` written at their instant ``when_ns`` (None: the deadline came first). Asleep
        (client processes on every core), the wait's last :data:`SPIN_NS` on the kernel timer
        is held too (:func:`sleep_until`; the thread asleep, no core taken): the kernel runs it
        the moment the timer fires, ahead of the server another worker's writes woke on its
        core, and the hold goes on into the burst's first stretch."""
        with contextlib.ExitStack() as hold:
            if not await self._due_at(when_ns, hold if self.asleep else None):
                return None
            return self._launch_burst(jobs, when_ns, hold)

    def _launch_burst(
        self, jobs: list[Job], scheduled: int, hold: contextlib.ExitStack
    ) -> list[tuple[Chain, Outgoing]]:
        """One instant's requests written now, ahead of ordinary processes where permitted
        (:func:`servelab.io.instant.held`: the server each write wakes does not take the core
        between two of them), :data:`HELD_NS` at a stretch, however large the burst (the first
        in ``hold``, which holds the wait's hold if it goes on, and ends with it)."""
        firsts: list[tuple[Chain, Outgoing]] = []
        stretch = hold
        while len(firsts) < len(jobs):
            with stretch:
                stretch.enter_context(instant.held())  # (within the wait's hold: nothing more)
                until = perf_counter_ns() + HELD_NS
                for job in jobs[len(firsts) :]:
                    firsts.append(self._launch(job, scheduled))
                    if perf_counter_ns() >= until:
                        break
            stretch = contextlib.ExitStack()
            if len(firsts) < len(jobs):
                os.sched_yield()  # between two stretches: whatever waits runs first
        return firsts

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


def slot_starts_ns(concurrency: int, ramp_ns: int, used: int | None = None) -> list[int]:
    """Slot i of C sends its first request ``i * ramp_ns / C`` after t0; only the first ``used``
    slots (a run's jobs: a slot past them would never send) when given."""
    slots = concurrency if used is None else max(min(concurrency, used), 1)
    return [i * ramp_ns // concurrency for i in range(slots)]
