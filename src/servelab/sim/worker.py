"""A simulated worker's state and generation logic (prefill or decode), independent of HTTP routing.

The HTTP layer (:mod:`servelab.sim.app`) parses requests and calls :meth:`Worker.prefill_items`
or :meth:`Worker.decode_items`; both return :class:`Sequence` objects the handler streams from.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
import traceback
import uuid
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

from servelab.sim.answers import Change, diverge, perturb_token
from servelab.sim.bootstrap import BootstrapClient, RoomInfo, RoomStore
from servelab.sim.faults import AbortTracker, Faults
from servelab.sim.kvlayout import garbled, sglang_corrupts
from servelab.sim.leak import KvLeak
from servelab.sim.metrics import WorkerMetrics
from servelab.sim.prefillscheduler import PrefillScheduler
from servelab.sim.prefixcache import page_hashes
from servelab.sim.profile import kv_transfer_s
from servelab.sim.protocol import GenItem, GenRequest
from servelab.sim.scheduler import DecodeScheduler, Sequence
from servelab.sim.settings import WorkerSettings
from servelab.sim.text import Output, plan_output, tokenize
from servelab.sim.tracing import SimTracer, mark

__all__ = ["TransferError", "Worker"]

_RECENT_ROOMS = 256
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TransferError:
    """Why a decode item could not get its KV (SGLang's abort with status 500: the handler
    answers 500 unless streaming, then an SSE ``error`` event in a 200 stream)."""

    room: int | None
    state: str
    message: str

    @classmethod
    def of(cls, room: int | None, state: str, reason: str) -> TransferError:
        """SGLang's wording (``srt/disaggregation/decode.py``, ``pop_transferred``)."""
        rid = uuid.uuid4().hex
        message = (
            f"Decode transfer failed for request rank=0 decode_req.req.rid='{rid}' "
            f"decode_req.req.bootstrap_room={room} with exception "
            f"KVTransferError(bootstrap_room={room}): {reason}"
        )
        return cls(room, state, message)


class Worker:
    """One simulated engine process: settings fixed at start-up, faults switchable at run time."""

    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        self.faults: Faults = settings.faults
        self.metrics = WorkerMetrics(model=settings.served_model_name, engine_type=settings.role)
        self.aborts = AbortTracker()
        self.started_at = time.time()
        self._t0 = time.monotonic()
        self.requests_served = 0
        self.recent_rooms: deque[dict[str, Any]] = deque(maxlen=_RECENT_ROOMS)
        self.recent_prefills: deque[dict[str, Any]] = deque(maxlen=_RECENT_ROOMS)
        self.rooms = RoomStore(settings.kv_layout)
        self._client = BootstrapClient()
        self._rng = random.Random(settings.seed)
        #: the ``kv_leak`` fault's ghosts, drawn from their own seeded generator (so switching
        #: the leak on changes no other draw)
        self.leak = KvLeak()
        self._leak_rng = random.Random(settings.seed + 1)
        self._waiting = 0
        self._stalled: set[Sequence] = set()
        self._fail_until = self._t0 + settings.faults.fail_fast_s
        self._warmup: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.prefill_sched: PrefillScheduler | None = None
        self.decode_sched: DecodeScheduler | None = None
        self.tracer = SimTracer(settings.otlp_endpoint, settings.role, settings.engine)
        #: set when the scheduler loop died of an exception (``crash`` holds its traceback)
        self.crashed = asyncio.Event()
        self.crash: str | None = None

    # ------------------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Start the scheduler loop of this worker's role, watched (:meth:`_scheduler_ended`)."""
        if self.settings.role == "prefill":
            self.prefill_sched = PrefillScheduler(self.settings, self.metrics)
            task = asyncio.create_task(self.prefill_sched.run())
        else:
            self.decode_sched = DecodeScheduler(self.settings, self.metrics, self.is_wedged)
            self._set_perturb()
            task = asyncio.create_task(self.decode_sched.run())
        task.add_done_callback(self._scheduler_ended)
        self._tasks.append(task)
        if self.faults.scheduler_crash:
            self._crash_scheduler()

    def _scheduler_ended(self, task: asyncio.Task[None]) -> None:
        """A scheduler loop that ended other than cancelled died: logged with its traceback as
        SGLang's ``run_scheduler_process`` logs it ("Scheduler hit an exception"), and
        :attr:`crashed` set (``/health`` then answers 503 and the server exits, as SGLang's
        does when its scheduler process dies)."""
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        assert exc is not None
        self.crash = "".join(traceback.format_exception(exc))
        logger.error("Scheduler hit an exception: %s", self.crash)
        self.crashed.set()

    def _crash_scheduler(self) -> None:
        sched = self.prefill_sched or self.decode_sched
        if sched is not None:
            sched.crash()

    async def stop(self) -> None:
        """Cancel the loops and close the bootstrap client (a loop that died was reported)."""
        for task in [*self._tasks, *([self._warmup] if self._warmup else [])]:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._client.close()
        self.tracer.shutdown()

    def ready_in(self) -> float:
        """Seconds until ``/health`` turns 200 (<= 0 when ready). Uses the current faults."""
        ready_after = self.settings.scaled(self.settings.profile.startup_s)
        ready_after += self.faults.slow_start_s
        return ready_after - (time.monotonic() - self._t0)

    @property
    def warmed_up(self) -> bool:
        """Whether the one-time warm-up (the first request's cost) has been paid."""
        return self._warmup is not None and self._warmup.done()

    async def warmup(self) -> None:
        """Pay the one-time warm-up (scaled); concurrent callers share it."""
        if self._warmup is not None and self._warmup.done():
            return  # paid: no shield (a future and two callbacks) per request
        if self._warmup is None:
            seconds = self.settings.scaled(self.settings.warmup_s)
            self._warmup = asyncio.create_task(asyncio.sleep(seconds))
        await asyncio.shield(self._warmup)

    # ------------------------------------------------------------------------------ faults
    def is_wedged(self) -> bool:
        """Whether the decode is wedged: the abort wedge tripped, or the ``wedge`` switch."""
        return self.aborts.wedged or self.faults.wedge

    def failing_fast(self) -> bool:
        """Whether generation requests are answered 500 at once (``fail_fast_s`` running)."""
        return time.monotonic() < self._fail_until

    def set_faults(self, changes: dict[str, Any]) -> Faults:
        """Apply fault changes (admin API). Switching ``abort_wedge`` or ``wedge`` off unwedges
        (``abort_wedge`` off also forgets the aborts); ``fail_fast_s`` counts from now."""
        self.faults = self.faults.updated(changes)
        if "abort_wedge" in changes and self.faults.abort_wedge is None:
            self.aborts.reset()
        if "fail_fast_s" in changes:
            self._fail_until = time.monotonic() + self.faults.fail_fast_s
        if self.faults.scheduler_crash:
            self._crash_scheduler()
        if not self.is_wedged() and self.decode_sched is not None:
            self.decode_sched.unwedged.set()
        self._set_perturb()
        return self.faults

    def _set_perturb(self) -> None:
        """Give the decode loop the per-token hook only while something may change answers."""
        if self.decode_sched is None:
            return
        active = self.faults.batch_nondeterminism > 0 or self.settings.index_keys_bf16
        self.decode_sched.perturb = self._perturb if active else None

    def _perturb(self, seq: Sequence, batch: int) -> None:
        rate, bf16 = self.faults.batch_nondeterminism, self.settings.index_keys_bf16
        seq.out = perturb_token(seq.out, seq.n_out - 1, batch, rate, bf16)

    def record_abort(self) -> None:
        """A client went away mid-request."""
        self.metrics.aborted += 1
        self.aborts.record(time.monotonic(), self.faults.abort_wedge)

    # ------------------------------------------------------------------------------ info
    def load(self) -> dict[str, int]:
        """Running and waiting requests (``/get_load``)."""
        running = self.metrics.running + self.metrics.stalled
        waiting = self.metrics.queued
        return {"dp_rank": 0, "num_reqs": running + waiting, "num_waiting_reqs": waiting}

    def info(self) -> dict[str, Any]:
        """The ``servelab`` object of ``/server_info``."""
        sched = self.prefill_sched or self.decode_sched
        return {
            "role": self.settings.role,
            "pid": os.getpid(),
            "profile": self.settings.profile.name,
            "knobs": self.settings.knobs(),
            "time_scale": self.settings.time_scale,
            "faults": self.faults.as_json(),
            "started_at": self.started_at,
            "ready": self.ready_in() <= 0,
            "warmed_up": self.warmed_up,
            "warmup_s": self.settings.warmup_s,
            "requests_served": self.requests_served,
            "aborts": self.aborts.total,
            "wedged": self.is_wedged(),
            "stalled": len(self._stalled),
            "failing_fast": self.failing_fast(),
            "scheduler": sched.lag.as_json() if sched else {},
            "step_s": self.step_table(),
            "recent_rooms": list(self.recent_rooms)[-32:],
            "recent_prefills": list(self.recent_prefills)[-32:],
            "kv_pool": self._pool(),
        }

    def _pool(self) -> dict[str, Any]:
        """The KV pool: its size, and the prefill's cache or the decode's retractions."""
        pool: dict[str, Any] = {"capacity_tokens": self.settings.limits.pool_tokens}
        if self.prefill_sched is not None:
            cache = self.prefill_sched.cache
            pool.update(cached_tokens=cache.cached_tokens, in_flight_tokens=cache.reserved,
                        evicted_tokens=cache.evicted_tokens)  # fmt: skip
        pool["retracted_total"] = self.metrics.retracted_total
        return pool

    def step_table(self) -> dict[str, float]:
        """Modelled decode step seconds at a few batch sizes (128-token prompts), for the knob
        in effect: what changes, after a restart only, when the knob changes."""
        return {str(b): self.settings.decode_step_s(b, b * 160) for b in (1, 64, 80, 96)}

    def _note_room(self, room: int | None, first_token: str, status: str) -> None:
        if room is not None:
            self.recent_rooms.append({"room": room, "first_token": first_token, "status": status})

    def _plan(self, req: GenRequest, item: GenItem, corrupt: bool) -> Output:
        seed = req.seed if req.seed is not None else self.settings.seed
        tools = list(req.tools) or None
        return plan_output(
            seed, item.prompt, item.max_tokens, tools=tools, corrupt=corrupt,
            tool_choice=req.tool_choice, greedy=req.greedy, after_tool=req.after_tool,
            index_topk=self.settings.limits.index_topk,
        )  # fmt: skip

    # ------------------------------------------------------------------------------ prefill
    def _page_hashes(self, item: GenItem) -> tuple[int, ...]:
        limits = self.settings.limits
        if not limits.prefix_cache:
            return ()
        return tuple(page_hashes(tokenize(item.prompt), limits.page_size))

    async def prefill_items(self, req: GenRequest) -> list[Sequence]:
        """Prefill every item (the prefix cache's tokens are not computed again), publish its
        room, and return one-token sequences."""
        assert self.prefill_sched is not None
        t_start = time.monotonic()
        self.metrics.prompt_tokens += sum(i.prompt_tokens for i in req.items)
        outs = [self._plan(req, item, False) for item in req.items]
        await self.warmup()
        sched = self.prefill_sched
        done = await asyncio.gather(
            *(sched.prefill(i.prompt_tokens, i.max_tokens, self._page_hashes(i)) for i in req.items)
        )
        mark(req.marks, "computing", min((d.started_ns for d in done), default=None))
        mark(req.marks, "done")
        seqs = []
        for item, out, pre in zip(req.items, outs, done, strict=True):
            first = out.pieces[0]
            if item.room is not None:
                info = RoomInfo(item.room, first, item.prompt_tokens, pre.cached_tokens)
                self.rooms.publish(info)
            self._note_room(item.room, first, "Published")
            self.recent_prefills.append(
                {"room": item.room, "prompt_tokens": item.prompt_tokens,
                 "cached_tokens": pre.cached_tokens, "modelled_s": round(pre.modelled_s, 6),
                 "wall_s": round(pre.wall_s, 6)}
            )  # fmt: skip
            one = replace(out, pieces=(first,), finish_reason="length")
            seq = Sequence(one, item.prompt_tokens, n_out=1, cached_tokens=pre.cached_tokens)
            seq.done.set()
            seqs.append(seq)
            self.metrics.ttft.observe(time.monotonic() - t_start)
        self.metrics.generation_tokens += len(seqs)
        # SGLang's usage leaves out the evictable prefix cache (its num_used is the pool less
        # the free and the evictable tokens): only what requests in flight hold
        self.metrics.token_usage = sched.cache.in_use_tokens / sched.cache.capacity
        return seqs

    # ------------------------------------------------------------------------------ decode
    async def _hang_until(self, deadline: float) -> None:
        """Stay in WaitingForInput while wedged, until the deadline."""
        assert self.decode_sched is not None
        while self.is_wedged() and (left := deadline - time.monotonic()) > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.decode_sched.unwedged.wait(), min(left, 1.0))

    async def _fetch_kv(self, item: GenItem, out: Output, deadline: float) -> RoomInfo | str:
        state = {"state": "Bootstrapping"}
        if item.room is None or item.bootstrap_host is None or item.bootstrap_port is None:
            return RoomInfo(-1, out.pieces[0], item.prompt_tokens)  # direct (non-PD) request
        got = await self._client.wait_room(
            item.bootstrap_host, item.bootstrap_port, item.room, deadline, state
        )
        return got if got is not None else state["state"]

    async def _acquire(
        self, item: GenItem, out: Output, handoff: bool = False
    ) -> Sequence | TransferError:
        assert self.decode_sched is not None
        t_start = time.monotonic()
        deadline = t_start + self.settings.waiting_timeout_s
        self._waiting += 1
        self.metrics.queued = self._waiting
        self.metrics.transfer_queue = self._waiting + self.leak.entries
        try:
            await self._hang_until(deadline)
            kv = await self._fetch_kv(item, out, deadline) if not self.is_wedged() else None
            await self._hang_until(deadline)
            if not isinstance(kv, RoomInfo) or self.is_wedged():
                state = kv if isinstance(kv, str) else "WaitingForInput"
                timeout = self.settings.waiting_timeout_s
                reason = f"Request {item.room} timed out after {timeout:g} s in KVPoll.{state}"
                self.metrics.transfer_failed += 1  # SGLang counts a timed-out poll as failed
                self._note_room(item.room, "", "Failed")
                return TransferError.of(item.room, state, reason)
            await asyncio.sleep(
                self.settings.scaled(kv_transfer_s(self.settings.profile, kv.prompt_tokens))
            )
            if self.faults.transfer_fails(self._rng.random(), kv.prompt_tokens):
                self.metrics.transfer_failed += 1
                self._note_room(item.room, kv.first_token, "Failed")
                reason = "Failed to get kvcache from prefill instance, it might be dead"
                return TransferError.of(item.room, "Failed", reason)
            await self.warmup()
            self._note_room(item.room, kv.first_token, "Success")
            if sglang_corrupts(self.settings.kv_layout, kv.layout):
                out = garbled(out)  # pages copied by index into slots of another layout
            handoff = handoff or (item.room is not None and item.bootstrap_host is not None)
            seq = self._start_decode(out, kv, handoff)
            self.metrics.ttft.observe(time.monotonic() - t_start)
            if handoff and self.leak.after_handoff(
                self.faults.kv_leak, self._leak_rng.random(), kv.prompt_tokens
            ):
                self.decode_sched.held_tokens = self.leak.tokens
            return seq
        finally:
            self._waiting -= 1
            self.metrics.queued = self._waiting
            self.metrics.transfer_queue = self._waiting + self.leak.entries

    def _start_decode(self, out: Output, kv: RoomInfo, handoff: bool) -> Sequence:
        """The sequence that decodes on from the prefill's first token (from wrong KV after a
        hand-off while ``kv_corrupt`` is on), joined to the batch or parked by the MLA tile."""
        assert self.decode_sched is not None
        planned = replace(out, pieces=(kv.first_token, *out.pieces[1:]))
        if handoff and self.faults.kv_corrupt:
            planned = diverge(planned, 1, Change.GARBLE)
        seq = Sequence(planned, kv.prompt_tokens, cached_tokens=kv.cached_tokens)
        if self.settings.decode_stalls(kv.prompt_tokens):
            self._stall(seq)
        else:
            self.decode_sched.join(seq)
        return seq

    async def decode_items(
        self, req: GenRequest, handoff: bool = False
    ) -> list[Sequence] | TransferError:
        """Get every item's KV, join the batch; on any failure cancel all and return the error.
        ``handoff``: the KV came from a prefill (vLLM's NIXL read; a SGLang item's bootstrap
        room says so itself), so ``kv_corrupt`` applies."""
        assert self.decode_sched is not None
        self.metrics.prompt_tokens += sum(i.prompt_tokens for i in req.items)
        corrupt = self.faults.corrupts(self.decode_sched.running + self._waiting)
        outs = [self._plan(req, item, corrupt) for item in req.items]
        if len(outs) == 1:  # the common case: no task and no gather
            results = [await self._acquire(req.items[0], outs[0], handoff)]
        else:
            results = await asyncio.gather(
                *(self._acquire(i, o, handoff) for i, o in zip(req.items, outs, strict=True))
            )
        seqs = [r for r in results if isinstance(r, Sequence)]
        errors = [r for r in results if isinstance(r, TransferError)]
        if errors:  # as SGLang: a transfer that failed never reaches the waiting queue
            for seq in seqs:
                seq.cancelled = True
            return errors[0]
        mark(req.marks, "kv_ready")
        return seqs

    def _stall(self, seq: Sequence) -> None:
        """Park ``seq`` in the batch for good: the MLA split-reduce never yields its first token."""
        self._stalled.add(seq)
        self.metrics.stalled = len(self._stalled)

    def is_stalled(self, seq: Sequence) -> bool:
        """Whether ``seq`` is parked by the MLA KV tile (it never emits a token)."""
        return seq in self._stalled

    def release(self, seqs: list[Sequence]) -> None:
        """Forget parked sequences whose client went away."""
        self._stalled.difference_update(seqs)
        self.metrics.stalled = len(self._stalled)

    def finished(self) -> None:
        """Count one request served to completion."""
        self.requests_served += 1
