"""The simulated engine's scheduling: the absolute schedule both schedulers keep (its lag, the
crash fault) and the continuous-batching decode; the prefill's batches are
:mod:`servelab.sim.prefillscheduler`.

Both run on an ABSOLUTE schedule: each step's deadline is the previous deadline plus the modelled
step time (times the time scale), measured from one t0, so event-loop overhead never accumulates;
a late step is followed at once by the next (catch-up) and the lag is recorded.

Emitting a step is cheap: per running sequence one integer increment and one call of its sink,
which writes the token's event to the connection from the step loop itself (a ready HTTP/1.1
chunk from a block rendered ahead, ``servelab.sim.tokenstream``): no coroutine wakes per token.
A handler wakes once, when its sequence is done. The loop's timer wakes a step up to
:data:`EARLY_S` early and the step sleeps the rest in the kernel (:func:`sleep_until`): asyncio
rounds a timer's wait up to whole milliseconds.

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
from typing import Any, Protocol

from servelab.errors import SimError
from servelab.sim.metrics import WorkerMetrics
from servelab.sim.settings import WorkerSettings
from servelab.sim.text import Output

__all__ = [
    "EARLY_S",
    "LAG_BUCKET_S",
    "RETRACT_DECODE_STEPS",
    "DecodeScheduler",
    "Perturb",
    "Sequence",
    "StepLag",
    "TokenSink",
    "check_crash",
    "sleep_until",
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


class StepLag:
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


#: How early the event loop wakes a step at most: asyncio rounds a timer's wait up to whole
#: milliseconds (epoll's timeout), so a timer fires up to 1 ms late; the step sleeps the rest of
#: its wait in the kernel instead (precise to tens of µs), holding the loop that long at most.
EARLY_S = 0.001


async def sleep_until(loop: asyncio.AbstractEventLoop, deadline: float, step: float) -> None:
    """Until ``deadline`` (the loop's clock): on the loop's timer up to :data:`EARLY_S` (a
    tenth of ``step`` for short steps) before it, then in the kernel for what is left."""
    early = min(EARLY_S, step / 10)
    await asyncio.sleep(max(0.0, deadline - loop.time() - early))
    rest = deadline - loop.time()
    if rest > 0:
        time.sleep(rest)


def check_crash(crash: bool) -> None:
    if crash:
        raise SimError("the scheduler_crash fault: the scheduler loop raised")


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
        self.lag = StepLag()
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

    def _admit(self) -> int:
        """Let joining sequences in while they fit; the KV tokens the batch holds."""
        self._running = [s for s in self._running if not s.cancelled]
        self._joining = [s for s in self._joining if not s.cancelled]
        limits = self._settings.limits
        used = self.held_tokens + sum([s.ctx_tokens + s.n_out for s in self._running])
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
        return used - self.held_tokens

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
            sink = seq.sink  # (Sequence.emitted, inlined: once per token)
            if sink is not None:
                sink()
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
            check_crash(self._crash)
            held = self._admit()
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
            ctx = self._retract(held)
            batch = len(self._running)
            step = self._settings.scaled(self._settings.decode_step_s(batch, ctx))
            t_next += step
            await sleep_until(loop, t_next, step)
            self.lag.add(max(0.0, loop.time() - t_next))
            if self._is_wedged():
                continue
            self._emit()
            self._metrics.gen_throughput = batch / step if step > 0 else 0.0
