"""``bench --workers N``: N client processes on one clock, each driving a share of the users.

Every worker is a spawned process with its own event loop (uvloop) and its own
:class:`~servelab.io.http.stream.StreamClient`, held to a CPU of its own (:func:`worker_cpus`);
the parent only plans and merges. One run is one
:class:`~servelab.ops.bench.part.Part` split N ways (:func:`~servelab.ops.bench.part.split`) that
share one ``t0_ns``: ``perf_counter_ns()`` is ``CLOCK_MONOTONIC``, one clock for every process of
the machine, so the parent picks a t0 a moment ahead and every worker's records are on the same
time line, merged exactly (:func:`~servelab.ops.bench.part.merge`). The parent talks to a worker
over a pipe, one command at a time: ``open`` (a client of ``concurrency`` slots, its share of
the connections opened ahead: the connect phase), ``part`` (run it, return its decoded
records; a trace's part carries its share as data, :class:`~servelab.ops.bench.replay.ReplayPlan`,
and the worker builds the replay), ``close``. Stopping
(``stop`` set: Ctrl-C) sends SIGTERM to every worker: each ends its part and returns what it has;
Ctrl-C at a terminal reaches the workers too, which do the same. No worker outlives
:class:`Workers`' ``async with``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from time import perf_counter_ns
from types import TracebackType
from typing import Any

import uvloop

from servelab.io.http.stream import StreamClient
from servelab.ops.bench.part import Part, PartResult, run_part
from servelab.ops.bench.replay import replay_of

__all__ = ["START_AHEAD_S", "ClientSpec", "Workers", "shared_t0", "spare_core", "worker_cpus"]

#: How far ahead of now the parent sets a run's shared t0 (every worker must have it by then).
START_AHEAD_S = 0.5


@dataclass(frozen=True, slots=True)
class ClientSpec:
    """How a worker builds its client."""

    url: str
    concurrency: int
    idle_timeout_s: float
    headers: tuple[tuple[str, str], ...] = ()
    proxy: str | None = None  # the forward proxy (None: straight)
    #: Connections opened ahead (None: ``concurrency``; a trace's replay opens a few and more as
    #: its bursts need them).
    ahead: int | None = None

    @property
    def opened(self) -> int:
        """The connections opened before a run."""
        return self.concurrency if self.ahead is None else self.ahead


class _Worker:
    """The worker side: one loop, one client, commands from the pipe until ``close``."""

    def __init__(self, pipe: Connection) -> None:
        self.pipe = pipe
        self.runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
        self.client: StreamClient | None = None
        self.stop: asyncio.Event | None = None

    def serve(self) -> None:
        with self.runner:
            self.runner.run(self._signals())
            while True:
                command, arg = self.pipe.recv()
                if command == "close":
                    break
                self.pipe.send(self.runner.run(self._do(command, arg)))
            if self.client is not None:
                self.runner.run(self.client.__aexit__(None, None, None))

    async def _signals(self) -> None:
        self.stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stop.set)

    async def _do(self, command: str, arg: Any) -> Any:
        if command == "open":
            spec: ClientSpec = arg
            self.client = StreamClient(
                spec.url, concurrency=spec.concurrency, idle_timeout_s=spec.idle_timeout_s,
                headers=dict(spec.headers), proxy=spec.proxy,
            )  # fmt: skip
            await self.client.__aenter__()
            return await self.client.connect(spec.opened)
        assert self.client is not None and self.stop is not None
        if command == "connect":
            return await self.client.connect(int(arg))
        part: Part = arg
        if part.replay_plan is not None:
            part = replace(part, replay=replay_of(part.replay_plan))
        self.stop.clear()
        gc.collect()
        gc.freeze()
        try:
            return await run_part(self.client, part, self.stop)
        finally:
            gc.unfreeze()


def _worker_main(pipe: Connection) -> None:
    _Worker(pipe).serve()


class Workers:
    """``async with Workers(n, spec) as workers: await workers.run(part, stop)``."""

    def __init__(self, n: int, spec: ClientSpec) -> None:
        self.n = n
        self.spec = spec
        self._procs: list[tuple[BaseProcess, Connection]] = []

    async def __aenter__(self) -> Workers:
        context = multiprocessing.get_context("spawn")
        for cpus in worker_cpus(self.n):
            parent, child = context.Pipe()
            proc = context.Process(target=_worker_main, args=(child,), daemon=True)
            proc.start()
            child.close()
            self._procs.append((proc, parent))
            if cpus is not None and proc.pid is not None:
                with contextlib.suppress(OSError):  # a worker that could not be held runs anywhere
                    os.sched_setaffinity(proc.pid, cpus)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for _proc, pipe in self._procs:
            with contextlib.suppress(OSError):
                pipe.send(("close", None))
        for proc, pipe in self._procs:
            await asyncio.to_thread(proc.join, 10)
            if proc.is_alive():
                proc.kill()
                await asyncio.to_thread(proc.join, 5)
            pipe.close()
        self._procs = []

    @property
    def pids(self) -> list[int]:
        """The worker processes' ids, in share order."""
        return [proc.pid for proc, _pipe in self._procs if proc.pid is not None]

    def _shares(self, total: int) -> list[int]:
        return [total // self.n + (w < total % self.n) for w in range(self.n)]

    async def open(self) -> list[int]:
        """Every worker opens its client and its share of the connections: their set-up ns (a
        closed loop's slots are shared too; a trace's replay gives each its full slots)."""
        if self.spec.ahead is None:
            specs = [replace(self.spec, concurrency=c) for c in self._shares(self.spec.concurrency)]
        else:
            specs = [replace(self.spec, ahead=a) for a in self._shares(self.spec.ahead)]
        replies = await self._ask([("open", s) for s in specs])
        return [x for reply in replies for x in reply]

    async def connect(self) -> list[int]:
        """Reopen connections the workers lost (before a run): their set-up ns."""
        shares = self._shares(self.spec.opened)
        replies = await self._ask([("connect", c) for c in shares])
        return [x for reply in replies for x in reply]

    async def run(self, parts: Sequence[Part], stop: asyncio.Event | None) -> list[PartResult]:
        """Run one part per worker; on ``stop``, signal them and collect what they measured."""
        ask = asyncio.create_task(self._ask([("part", p) for p in parts]))
        if stop is not None:
            stopper = asyncio.create_task(stop.wait())
            await asyncio.wait({ask, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if not ask.done():
                for proc, _pipe in self._procs:
                    if proc.pid is not None:
                        os.kill(proc.pid, signal.SIGTERM)
        results: list[PartResult] = await ask
        return results

    async def _ask(self, commands: Sequence[tuple[str, Any]]) -> list[Any]:
        for (_proc, pipe), command in zip(self._procs, commands, strict=True):
            pipe.send(command)
        return list(await asyncio.gather(*(self._reply(pipe) for _p, pipe in self._procs)))

    @staticmethod
    async def _reply(pipe: Connection) -> Any:
        try:
            return await asyncio.to_thread(pipe.recv)
        except EOFError:
            raise RuntimeError("a bench worker process died") from None


def worker_cpus(n: int) -> list[set[int] | None]:
    """The CPU each of ``n`` workers is held to: the CPUs this process may use, dealt in turn
    (None: any, with one worker, one CPU, or no affinity on this platform). Left to the kernel,
    two workers that sleep between a trace's instants were often woken on one core, and at an
    instant one waited for the other's burst (and the router it woke) while the other core ran
    something else: a burst's share cut for 2-26 ms (docs/bench.md)."""
    getter = getattr(os, "sched_getaffinity", None)
    allowed = sorted(getter(0)) if getter is not None and n > 1 else []
    if len(allowed) < 2:
        return [None] * n
    return [{allowed[w % len(allowed)]} for w in range(n)]


def spare_core(processes: int) -> bool:
    """True when ``processes`` client processes, each spinning before a replay's instants, would
    leave a CPU of this process's to the server: else they wait asleep (:class:`Part.asleep
    <servelab.ops.bench.part.Part>`). Two workers spinning on two cores held both at every
    instant, and what woke then (the router at the other's first write, an engine) cut one of
    them for a scheduler slice: dispatch p99 2-14 ms against 0.6-6.6 asleep (docs/bench.md)."""
    getter = getattr(os, "sched_getaffinity", None)
    cpus = len(getter(0)) if getter is not None else (os.cpu_count() or 1)
    return processes < cpus


def shared_t0() -> int:
    """A t0 a moment ahead, for every worker's share of one run."""
    return perf_counter_ns() + round(START_AHEAD_S * 1e9)
