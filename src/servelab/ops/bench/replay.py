"""A trace's replay (``bench --trace``): :class:`Replay`, what :meth:`Load.replay
<servelab.ops.bench.load.Load.replay>` sends, and :class:`ReplayPlan`, the same as plain data, from
which each process of ``bench --trace --workers N`` builds the replay of its share.

With N processes the window's conversations are dealt in turn, in the trace's order (the k-th to
process k mod N), so a burst's requests are split evenly; every process reads the whole window and
numbers the requests as one process would (:func:`replay_of`): the merged records are the one
process's, on the same clock (one ``t0_ns``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from servelab.core.load.trace import PromptBuilder, TracePlan, TraceSession, session_offsets_ns
from servelab.core.redaction import clip_long, redact
from servelab.io.http.client import chat_body, completion_body
from servelab.io.tracefile import trace_sessions
from servelab.ops.bench.jobs import Job
from servelab.ops.bench.load import Load

__all__ = ["YIELD_EVERY", "Replay", "ReplayPlan", "replay_of"]

#: A burst's jobs built between two yields to the loop (a stop signal waits for no more).
YIELD_EVERY = 64


@dataclass(slots=True)
class Replay:
    """A trace to replay (``bench --trace``): its conversations with their start offsets (ns
    from t0, already ``speedup`` times faster), how a turn's prompt is built, and how a body is
    made. Requests are numbered in the order of the trace, a conversation's turns together
    (``bases``: a conversation's first number given ahead, by ordinal: a share of the trace
    numbers its requests as the whole would); ``names`` keeps each conversation's id by its
    ordinal (what the records carry), what the redaction policy finds in it masked (an id of a
    secret's shape, ``sk-...``, is never stored nor shown) and cut after 200 characters."""

    sessions: Iterator[tuple[int, TraceSession]]
    prompts: PromptBuilder
    body: Callable[[str, int], bytes]
    speedup: float = 1.0
    names: dict[int, str] = field(default_factory=dict)
    bases: dict[int, int] = field(default_factory=dict)
    _first: dict[int, int] = field(default_factory=dict)
    _next: int = 0

    def job(self, session: TraceSession, turn: int, load: Load) -> Job:
        """Turn ``turn`` of ``session`` as a job whose bytes ``load`` has built."""
        if turn == 0:
            self._first[session.ordinal] = self._base(session)
            if session.session is not None:
                self.names[session.ordinal] = clip_long(redact(session.session))
        index = self._first[session.ordinal] + turn
        if turn + 1 == len(session.turns):
            del self._first[session.ordinal]
        spec = session.turns[turn]
        before = session.turns[turn - 1] if turn else None
        prompt = self.prompts.prompt(spec, index, before)
        ordinal = None if session.session is None else session.ordinal
        body = self.body(prompt, spec.output_length)
        job = Job(index, spec.input_length, body, ordinal, max_tokens=spec.output_length)
        load.prepare([job])
        return job

    async def first_jobs(self, burst: list[TraceSession], load: Load) -> list[Job]:
        """The first turns of the conversations of one instant as jobs, yielding to the loop
        every :data:`YIELD_EVERY` (a stop signal is seen while a burst's prompts are built)."""
        jobs = []
        for k, session in enumerate(burst, 1):
            jobs.append(self.job(session, 0, load))
            if k % YIELD_EVERY == 0:
                await asyncio.sleep(0)
        return jobs

    def _base(self, session: TraceSession) -> int:
        base = self.bases.pop(session.ordinal, None)
        if base is None:
            base, self._next = self._next, self._next + len(session.turns)
        return base


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    """What a replay is built from (picklable: it goes to a worker process): the trace as asked,
    the seed of its prompts, the request bodies' model, endpoint and ``ignore_eos``, and which
    share of the window's conversations this process sends (``share`` of ``shares``)."""

    trace: TracePlan
    seed: int
    model: str
    endpoint: str
    ignore_eos: bool
    share: int = 0
    shares: int = 1


def replay_of(plan: ReplayPlan) -> Replay:
    """The trace's window as ``plan``'s share replays it: read as it goes, every prompt built
    from its ids just before its request is due."""
    make = chat_body if "chat" in plan.endpoint else completion_body

    def body(prompt: str, max_tokens: int) -> bytes:
        return make(plan.model, prompt, max_tokens, ignore_eos=plan.ignore_eos)

    trace = plan.trace
    held = (s for s in trace_sessions(Path(trace.path)) if trace.window.holds(s))
    offsets = session_offsets_ns(held, trace.speedup)
    replay = Replay(offsets, PromptBuilder(trace.block_size, plan.seed), body, trace.speedup)
    if plan.shares > 1:
        replay.sessions = _dealt(offsets, plan.share, plan.shares, replay.bases)
    return replay


def _dealt(
    sessions: Iterator[tuple[int, TraceSession]], share: int, shares: int, bases: dict[int, int]
) -> Iterator[tuple[int, TraceSession]]:
    """The ``share``-th of every ``shares`` conversations, each with its first request's number
    in ``bases`` (the requests of every conversation before it counted)."""
    number = 0
    for k, (offset, session) in enumerate(sessions):
        if k % shares == share:
            bases[session.ordinal] = number
            yield offset, session
        number += len(session.turns)
