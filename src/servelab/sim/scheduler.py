"""The simulated engine's schedulers: batched prefill and continuous-batching decode.

Both run on an ABSOLUTE schedule: each step's deadline is the previous deadline plus the modelled
step time (times the time scale), measured from one t0, so event-loop overhead never accumulates;
a late step is followed at once by the next (catch-up) and the lag is recorded.

Emitting a step is cheap: one integer increment and one future resolution per running sequence;
the request handlers write the bytes (one pre-rendered frame + ``json.dumps(piece)`` per token).

Smallest practical time scale on a 2-core box (prefill + decode + real router + a streaming
closed-loop client, 128 in / 64 out, C64..C96, measured with ``benchmarks/sim_calibration.py``):
0.5 keeps every 512/256 ratio in band and the C96 < C80 anomaly visible, run after run, even with
other work on the box; 0.25 still lands the ratios on a quiet box, but the ~2.5% anomaly margin
drowns in noise under load; at 0.1 the decode loop falls seconds behind. Functional tests that do
not measure throughput run fine at 0.05. ``/server_info`` -> ``servelab.scheduler.max_lag_s``
tells whether a run kept up.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from servelab.sim.metrics import WorkerMetrics
from servelab.sim.profile import decode_step_s, prefill_s
from servelab.sim.settings import WorkerSettings
from servelab.sim.text import Output

__all__ = ["LAG_BUCKET_S", "DecodeScheduler", "PrefillScheduler", "Sequence"]

_MAX_PREFILL_BATCH_TOKENS = 16384
_MAX_RUNNING = 1024


@dataclass(eq=False)
class Sequence:
    """One decoding sequence: what it will say and how far it got."""

    out: Output
    ctx_tokens: int
    n_out: int = 0
    waiter: asyncio.Future[None] | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: bool = False

    @property
    def target(self) -> int:
        """Number of output tokens this sequence ends with."""
        return len(self.out.pieces)

    def wake(self) -> None:
        """Resolve the handler's waiter, if any."""
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def progress(self) -> None:
        """Wait until at least one more token was emitted (or the sequence ended)."""
        if self.done.is_set():
            return
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None


#: Step lateness is counted in buckets of this width (seconds) up to ``_LAG_BUCKETS`` of them.
LAG_BUCKET_S = 0.0001
_LAG_BUCKETS = 1000


class _Lag:
    """How far behind its absolute schedule a loop ran (wall seconds): the decode step jitter.

    ``as_json()["hist"]`` maps bucket index (``LAG_BUCKET_S`` wide, the last one open-ended) to
    the steps that woke that late, cumulative since start: two reads diffed give a window's
    distribution exactly (``benchmarks/sim_calibration.py --jitter``).
    """

    def __init__(self) -> None:
        self.max_s = 0.0
        self.total_s = 0.0
        self.steps = 0
        self.hist: dict[int, int] = {}

    def add(self, lag: float) -> None:
        self.steps += 1
        self.total_s += lag
        self.max_s = max(self.max_s, lag)
        bucket = min(int(lag / LAG_BUCKET_S), _LAG_BUCKETS - 1)
        self.hist[bucket] = self.hist.get(bucket, 0) + 1

    def as_json(self) -> dict[str, Any]:
        mean = self.total_s / self.steps if self.steps else 0.0
        return {
            "steps": self.steps,
            "mean_lag_s": round(mean, 6),
            "max_lag_s": round(self.max_s, 6),
            "bucket_s": LAG_BUCKET_S,
            "hist": {str(k): v for k, v in sorted(self.hist.items())},
        }


class PrefillScheduler:
    """Prefill batches: all waiting prompts (up to a token budget) run together."""

    def __init__(self, settings: WorkerSettings, metrics: WorkerMetrics) -> None:
        self._settings = settings
        self._metrics = metrics
        self._queue: list[tuple[int, asyncio.Future[int]]] = []
        self._kick: asyncio.Event = asyncio.Event()
        self.lag = _Lag()

    async def prefill(self, tokens: int) -> int:
        """Wait until ``tokens`` of one sequence were prefilled; the wall time (ns) its batch
        started computing."""
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._queue.append((tokens, fut))
        self._metrics.queued = len(self._queue)
        self._kick.set()
        return await fut

    def _take_batch(self) -> list[tuple[int, asyncio.Future[int]]]:
        batch: list[tuple[int, asyncio.Future[int]]] = []
        budget = _MAX_PREFILL_BATCH_TOKENS
        while self._queue and (not batch or self._queue[0][0] <= budget):
            item = self._queue.pop(0)
            budget -= item[0]
            batch.append(item)
        return batch

    async def run(self) -> None:
        """The prefill loop (runs until cancelled)."""
        loop = asyncio.get_running_loop()
        profile = self._settings.profile
        while True:
            await self._kick.wait()
            self._kick.clear()
            t_next = loop.time()
            while self._queue:
                batch = self._take_batch()
                started_ns = time.time_ns()
                self._metrics.queued = len(self._queue)
                self._metrics.running = len(batch)
                extra = sum(prefill_s(profile, t) - profile.prefill_a_s for t, _ in batch)
                t_next += self._settings.scaled(profile.prefill_a_s + extra)
                await asyncio.sleep(max(0.0, t_next - loop.time()))
                self.lag.add(max(0.0, loop.time() - t_next))
                for _, fut in batch:
                    if not fut.done():
                        fut.set_result(started_ns)
                t_next = max(t_next, loop.time() - 0.05)
            self._metrics.running = 0


class DecodeScheduler:
    """Continuous batching: sequences join at step boundaries and leave when done."""

    def __init__(
        self,
        settings: WorkerSettings,
        metrics: WorkerMetrics,
        is_wedged: Callable[[], bool],
    ) -> None:
        self._settings = settings
        self._metrics = metrics
        self._is_wedged = is_wedged
        self._running: list[Sequence] = []
        self._joining: list[Sequence] = []
        self._kick = asyncio.Event()
        self.unwedged = asyncio.Event()
        self.lag = _Lag()

    @property
    def running(self) -> int:
        """Sequences in the batch (including those joining at the next step)."""
        return len(self._running) + len(self._joining)

    def join(self, seq: Sequence) -> None:
        """Add a sequence whose KV has arrived; its first (prefill) token is emitted now."""
        seq.n_out = min(1, seq.target)
        self._metrics.generation_tokens += seq.n_out
        if seq.n_out >= seq.target:
            seq.done.set()
        else:
            self._joining.append(seq)
            self._metrics.running = self.running
            self._kick.set()
        seq.wake()

    def _admit(self) -> None:
        if self._joining:
            room = max(0, _MAX_RUNNING - len(self._running))
            self._running += self._joining[:room]
            del self._joining[:room]
        self._running = [s for s in self._running if not s.cancelled]

    def _emit(self) -> None:
        finished = False
        for seq in self._running:
            seq.n_out += 1
            if seq.n_out >= seq.target:
                seq.done.set()
                finished = True
            seq.wake()
        self._metrics.generation_tokens += len(self._running)
        if finished:
            self._running = [s for s in self._running if not s.done.is_set()]
        self._metrics.running = self.running

    async def _wait_unwedged(self) -> None:
        self.unwedged.clear()
        while self._is_wedged():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.unwedged.wait(), 1.0)
            self.unwedged.clear()

    async def run(self) -> None:
        """The decode loop (runs until cancelled)."""
        loop = asyncio.get_running_loop()
        profile, knob = self._settings.profile, self._settings.target_ctas
        t_next: float | None = None
        while True:
            self._admit()
            if self._is_wedged():
                await self._wait_unwedged()
                t_next = None
                continue
            if not self._running:
                self._metrics.gen_throughput = 0.0
                self._kick.clear()
                await self._kick.wait()
                t_next = None
                continue
            now = loop.time()
            t_next = now if t_next is None else t_next
            batch = len(self._running)
            ctx = sum(s.ctx_tokens + s.n_out for s in self._running)
            step = self._settings.scaled(decode_step_s(profile, batch, ctx, knob))
            t_next += step
            await asyncio.sleep(max(0.0, t_next - loop.time()))
            self.lag.add(max(0.0, loop.time() - t_next))
            if self._is_wedged():
                continue
            self._emit()
            self._metrics.gen_throughput = batch / step if step > 0 else 0.0
