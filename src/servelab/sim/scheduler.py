"""The simulated engine's schedulers: batched prefill and continuous-batching decode.

Both run on an ABSOLUTE schedule: each step's deadline is the previous deadline plus the modelled
step time (times the time scale), measured from one t0, so event-loop overhead never accumulates;
a late step is followed at once by the next (catch-up) and the lag is recorded.

Emitting a step is cheap: per running sequence one integer increment and one call of its sink,
which writes the token's event to the connection from the step loop itself (one pre-rendered
frame + ``json.dumps(piece)`` per token, ``servelab.sim.tokenstream``): no coroutine wakes per
token. A handler wakes once, when its sequence is done.

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
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from servelab.errors import SimError
from servelab.sim.limits import Limits
from servelab.sim.metrics import WorkerMetrics
from servelab.sim.prefixcache import Lease, PrefixCache
from servelab.sim.profile import prefill_chunk_s
from servelab.sim.settings import WorkerSettings
from servelab.sim.text import Output

__all__ = [
    "LAG_BUCKET_S",
    "RETRACT_DECODE_STEPS",
    "DecodeScheduler",
    "Perturb",
    "PrefillJob",
    "PrefillScheduler",
    "Prefilled",
    "Sequence",
    "TokenSink",
    "order_waiting",
    "take_batch",
]


class TokenSink(Protocol):
    """Called by the step loop after each step that gave its sequence tokens
    (``servelab.sim.tokenstream.TokenWriter`` writes them to the connection)."""

    def __call__(self) -> None: ...


#: Called for each sequence right after a decode step gave it a token, with the step's batch size
#: (``servelab.sim.answers.perturb_token``: what may change the answer from that token on).
Perturb = Callable[["Sequence", int], None]


@dataclass(eq=False)
class Sequence:
    """One decoding sequence: what it will say, how far it got, and who takes its tokens."""

    out: Output
    ctx_tokens: int
    n_out: int = 0
    sink: TokenSink | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: bool = False
    #: prompt tokens the prefill's prefix cache held (reported in ``usage``)
    cached_tokens: int = 0
    #: Number of output tokens this sequence ends with (``len(out.pieces)``).
    target: int = field(init=False)

    def __post_init__(self) -> None:
        self.target = len(self.out.pieces)

    def emitted(self) -> None:
        """Tokens were emitted: hand them to the sink, if any."""
        if self.sink is not None:
            self.sink()


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


def _check_crash(crash: bool) -> None:
    if crash:
        raise SimError("the scheduler_crash fault: the scheduler loop raised")


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
        self.lag = _Lag()
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
            _check_crash(self._crash)
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


#: Tokens of headroom per running request the decode keeps in its KV pool (SGLang's
#: ``SGLANG_RETRACT_DECODE_STEPS``, 20): a sequence joins only with that much room for every
#: running one, and a retraction frees room until there is.
RETRACT_DECODE_STEPS = 20


def _tokens(seq: Sequence) -> int:
    """KV tokens a running sequence holds."""
    return seq.ctx_tokens + seq.n_out


class DecodeScheduler:
    """Continuous batching: sequences join at step boundaries and leave when done.

    The running batch is capped by ``max_running_requests`` and by the KV pool
    (``Limits.pool_tokens``): a sequence joins only when its context fits with
    :data:`RETRACT_DECODE_STEPS` tokens of headroom per running sequence; when the next token of
    every running sequence would not fit, the decode retracts (SGLang's ``retract_decode``:
    the fewest output tokens first, the longest prompt among equals) until the headroom is back,
    and the retracted sequences rejoin first when there is room (their KV modelled as kept
    aside, no extra time).
    """

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
        #: what may change answers token by token (None: nothing does, the fast path)
        self.perturb: Perturb | None = None
        self._crash = False
        self.held_tokens = 0  #: KV held outside the batch (the ``kv_leak`` fault's ghosts)

    def crash(self) -> None:
        """The ``scheduler_crash`` fault: the loop raises at its next step."""
        self._crash = True
        self._kick.set()
        self.unwedged.set()

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
        seq.emitted()

    def _admit(self) -> None:
        self._running = [s for s in self._running if not s.cancelled]
        self._joining = [s for s in self._joining if not s.cancelled]
        limits = self._settings.limits
        used = self.held_tokens + sum(_tokens(s) for s in self._running)
        admitted = 0
        for seq in self._joining:
            if len(self._running) >= limits.max_running_requests:
                break
            headroom = RETRACT_DECODE_STEPS * (len(self._running) + 1)
            if self._running and used + _tokens(seq) + headroom > limits.pool_tokens:
                break
            self._running.append(seq)
            used += _tokens(seq)
            admitted += 1
        del self._joining[:admitted]
        self._metrics.token_usage = min(1.0, used / limits.pool_tokens)

    def _retract(self, used: int) -> int:
        """Make room for the next step's tokens (see the class); the tokens left in use."""
        pool = self._settings.limits.pool_tokens - self.held_tokens  # what the batch may use
        if used + len(self._running) <= pool:
            return used
        order = sorted(self._running, key=lambda s: (s.n_out, -s.ctx_tokens))
        retracted: list[Sequence] = []
        for seq in order:
            if len(self._running) - len(retracted) <= 1:
                break
            if used + RETRACT_DECODE_STEPS * (len(self._running) - len(retracted)) <= pool:
                break
            retracted.append(seq)
            used -= _tokens(seq)
        gone = set(retracted)
        self._running = [s for s in self._running if s not in gone]
        self._joining[:0] = retracted
        self._metrics.retracted = len(retracted)
        self._metrics.retracted_total += len(retracted)
        return used

    def _emit(self) -> None:
        finished = False
        perturb, batch = self.perturb, len(self._running)
        for seq in self._running:
            seq.n_out += 1
            if perturb is not None:
                perturb(seq, batch)
            seq.emitted()
            if seq.n_out >= seq.target:
                seq.done.set()
                finished = True
        self._metrics.generation_tokens += len(self._running)
        if finished:
            self._running = [s for s in self._running if not s.done.is_set()]
        self._metrics.running = self.running

    async def _wait_unwedged(self) -> None:
        self.unwedged.clear()
        while self._is_wedged() and not self._crash:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.unwedged.wait(), 1.0)
            self.unwedged.clear()

    async def run(self) -> None:
        """The decode loop (runs until cancelled)."""
        loop = asyncio.get_running_loop()
        t_next: float | None = None
        while True:
            _check_crash(self._crash)
            self._admit()
            if self._is_wedged():
                await self._wait_unwedged()
                t_next = None
                continue
            if not self._running:  # (the gauge too: the last sequences may have been cancelled)
                self._metrics.gen_throughput, self._metrics.running = 0.0, self.running
                self._kick.clear()
                await self._kick.wait()
                t_next = None
                continue
            t_next = loop.time() if t_next is None else t_next
            ctx = self._retract(sum(_tokens(s) for s in self._running))
            batch = len(self._running)
            step = self._settings.scaled(self._settings.decode_step_s(batch, ctx))
            t_next += step
            await asyncio.sleep(max(0.0, t_next - loop.time()))
            self.lag.add(max(0.0, loop.time() - t_next))
            if self._is_wedged():
                continue
            self._emit()
            self._metrics.gen_throughput = batch / step if step > 0 else 0.0
