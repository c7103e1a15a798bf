"""The simulated engine's prefill scheduler: batches of the waiting prompts, chunked, capped and
ordered as the engine's arguments say (:func:`take_batch`, :func:`order_waiting`), computing only
what the prefix cache does not hold, on the absolute schedule of :mod:`servelab.sim.scheduler`.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from servelab.sim.limits import Limits
from servelab.sim.metrics import WorkerMetrics
from servelab.sim.prefixcache import Lease, PrefixCache
from servelab.sim.profile import prefill_chunk_s
from servelab.sim.scheduler import StepLag, check_crash
from servelab.sim.settings import WorkerSettings

__all__ = ["PrefillJob", "PrefillScheduler", "Prefilled", "order_waiting", "take_batch"]


@dataclass(frozen=True)
class Prefilled:
    """A sequence's prefill: when its first batch started computing (wall ns), the prefix its
    cache held, its modelled compute seconds (its batches' launch and its own tokens' compute)
    and the wall seconds from its first batch's start to its last batch's end."""

    started_ns: int
    cached_tokens: int
    modelled_s: float
    wall_s: float


@dataclass(eq=False)
class PrefillJob:
    """One sequence waiting for (or in) prefill: its prompt and page hashes, the prefix already
    in the KV cache, how far its chunks got, and the future its handler awaits."""

    tokens: int
    max_tokens: int
    arrival: int
    future: asyncio.Future[Prefilled]
    hashes: tuple[int, ...] = ()
    cached: int = 0
    done: int = 0
    lease: Lease | None = None
    started_ns: int = 0
    started_at: float = 0.0
    modelled_s: float = 0.0
    #: its request went away: out of the queue, skipped by the batch it rode in
    cancelled: bool = False

    @property
    def remaining(self) -> int:
        """Tokens still to compute."""
        return max(self.tokens - self.cached - self.done, 0)


#: Above this many waiting requests SGLang's ``lpm`` policy falls back to ``fcfs``
#: (``schedule_policy.py``), as its prefix matching would cost too much.
_LPM_QUEUE_LIMIT = 128


def order_waiting(jobs: list[PrefillJob], policy: str, rng: random.Random) -> list[PrefillJob]:
    """The waiting jobs in the order ``policy`` takes them (SGLang's ``--schedule-policy``):
    ``lpm``/``dfs-weight`` the longest cached prefix first, ``lof`` the longest output first,
    ``random`` shuffled (seeded), every other policy (``fcfs``...) in arrival order. A chunked
    job already under way stays first whatever the policy."""
    head = [j for j in jobs if j.done > 0]
    rest = [j for j in jobs if j.done == 0]
    if policy in ("lpm", "dfs-weight") and len(rest) <= _LPM_QUEUE_LIMIT:
        rest.sort(key=lambda j: (-j.cached, j.arrival))
    elif policy == "lof":
        rest.sort(key=lambda j: (-j.max_tokens, j.arrival))
    elif policy == "random":
        rng.shuffle(rest)
    return head + rest


def _always(_job: PrefillJob) -> bool:
    return True


def take_batch(
    jobs: list[PrefillJob], limits: Limits, admit: Callable[[PrefillJob], bool] = _always
) -> list[tuple[PrefillJob, int]]:
    """The next prefill batch from ``jobs`` (already in policy order): each job with the tokens
    it computes now. SGLang's ``PrefillAdder``: at most ``max_running_requests`` jobs and
    ``min(max_prefill_tokens, chunked_prefill_size)`` new tokens; the job that does not fit is
    chunked to the tokens left (without chunked prefill a first job too long runs whole).
    ``admit`` gets each job a place in the KV pool first (False: no room, the batch ends)."""
    budget = limits.max_prefill_tokens
    if limits.chunk_tokens:
        budget = min(budget, limits.chunk_tokens)
    batch: list[tuple[PrefillJob, int]] = []
    for job in jobs:
        if len(batch) >= limits.max_running_requests or budget <= 0 or not admit(job):
            break
        need = job.remaining
        if need <= budget:
            batch.append((job, need))
            budget -= need
        elif limits.chunk_tokens or not batch:
            batch.append((job, budget if limits.chunk_tokens else need))
            break
        else:
            break
    return batch


class PrefillScheduler:
    """Prefill batches of the waiting prompts (chunked, capped and ordered as the engine's
    arguments say: :func:`take_batch`, :func:`order_waiting`), computing only what the prefix
    cache does not hold (:class:`~servelab.sim.prefixcache.PrefixCache`)."""

    def __init__(self, settings: WorkerSettings, metrics: WorkerMetrics) -> None:
        self._settings = settings
        self._metrics = metrics
        limits = settings.limits
        self.cache = PrefixCache(limits.pool_tokens, limits.page_size, enabled=limits.prefix_cache)
        self._queue: list[PrefillJob] = []
        self._kick: asyncio.Event = asyncio.Event()
        self._arrivals = 0
        self._rng = random.Random(settings.seed)
        self.lag = StepLag()
        self._crash = False

    def crash(self) -> None:
        """The ``scheduler_crash`` fault: the loop raises at its next step."""
        self._crash = True
        self._kick.set()

    async def prefill(
        self, tokens: int, max_tokens: int = 0, hashes: tuple[int, ...] = ()
    ) -> Prefilled:
        """Wait until ``tokens`` of one sequence (``hashes``: its page hashes) were prefilled."""
        fut: asyncio.Future[Prefilled] = asyncio.get_running_loop().create_future()
        self._arrivals += 1
        job = PrefillJob(tokens, max_tokens, self._arrivals, fut, hashes)
        job.cached = self.cache.match(hashes, tokens)
        self._queue.append(job)
        self._metrics.queued = len(self._queue)
        self._kick.set()
        try:
            return await fut
        except asyncio.CancelledError:
            self._drop(job)
            raise

    def _drop(self, job: PrefillJob) -> None:
        """A job whose request went away (cancelled): out of the queue, its KV reservation and
        locks released; a batch it rides in ends without it."""
        job.cancelled = True
        if job in self._queue:
            self._queue.remove(job)
            if job.lease is not None:
                self.cache.release(job.lease)
        self._metrics.queued = len(self._queue)

    def _admit(self, job: PrefillJob) -> bool:
        if job.lease is None:
            alone = self.cache.reserved == 0
            job.lease = self.cache.admit(job.hashes, job.tokens, force=alone)
            if job.lease is None:
                return False
            job.cached = job.lease.cached_tokens
        return True

    def _account(self, batch: list[tuple[PrefillJob, int]], started_ns: int, now: float) -> float:
        """Stamp the batch's jobs, record the cache hit rate (SGLang's: the batch's newly
        admitted prefix tokens over those plus its computed tokens); the batch's seconds."""
        profile = self._settings.profile
        hits = sum(job.cached for job, _ in batch if job.done == 0)
        new = sum(n for _, n in batch)
        self._metrics.cache_hit_rate = hits / (hits + new) if hits + new else 0.0
        total = profile.prefill_a_s
        for job, n in batch:
            compute = prefill_chunk_s(profile, n, job.cached + job.done)
            total += compute
            job.modelled_s += profile.prefill_a_s + compute
            if job.done == 0:
                job.started_ns, job.started_at = started_ns, now
        return total

    def _finish(self, job: PrefillJob, now: float) -> None:
        self._queue.remove(job)
        if job.lease is not None:
            self.cache.finish(job.lease)
        self._metrics.cached(job.tokens, job.cached)
        done = Prefilled(job.started_ns, job.cached, job.modelled_s, now - job.started_at)
        if not job.future.done():
            job.future.set_result(done)

    async def run(self) -> None:
        """The prefill loop (runs until cancelled)."""
        loop = asyncio.get_running_loop()
        limits = self._settings.limits
        while True:
            await self._kick.wait()
            self._kick.clear()
            check_crash(self._crash)
            t_next = loop.time()
            while self._queue:
                self._queue = order_waiting(self._queue, limits.schedule_policy, self._rng)
                batch = take_batch(self._queue, limits, self._admit)
                self._metrics.running = len(batch)
                self._metrics.queued = len(self._queue) - len(batch)
                started = max(t_next, loop.time())
                t_next += self._settings.scaled(self._account(batch, time.time_ns(), started))
                await asyncio.sleep(max(0.0, t_next - loop.time()))
                self.lag.add(max(0.0, loop.time() - t_next))
                for job, n in batch:
                    job.done += n
                    if job.remaining == 0 and not job.cancelled:
                        self._finish(job, loop.time())
                t_next = max(t_next, loop.time() - 0.05)
            self._metrics.running = 0
            self._metrics.queued = 0
