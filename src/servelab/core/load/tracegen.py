"""Seeded sample traces in the Mooncake format (pure): the same seed writes the same lines.

Two shapes, each a generator of :class:`TraceEntry` in file order (one line each, as the codec
writes it; :mod:`servelab.core.load.trace` reads them back):

- :func:`agentic_trace`: agent sessions arriving as a Poisson process. Every session starts with
  the same system prompt and tools (whole blocks, the same ids in every session), then each turn
  resends the whole history (the previous prompt, the previous answer, a tool's result or the
  user's next message), so its ids are the previous turn's full blocks followed by new ones; a
  block the previous prompt left partial is rewritten, so it gets a new id. The next turn waits
  for the tool (the ``delay``).
- :func:`chat_trace`: a long-tail chat mix, Poisson arrivals of single requests whose prompt and
  answer lengths are log-normal (a few very long prompts), half of them opening with one of a few
  popular system prompts (Zipf's law).

Lengths are in tokens; a hash id names one block of ``block_size`` tokens. What the shapes' caps
changed (an answer cut to its cap, a chat prompt cut to its cap, an agent's turns left out once its
history no longer fits) is counted in the :class:`Capped` a caller passes, so it is said, never
done silently.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

from servelab.core.ledger.codec import OMITTED_IF_NONE
from servelab.core.load.trace import DEFAULT_BLOCK_SIZE, MAX_TRACE_MS
from servelab.errors import TraceError

__all__ = [
    "MAX_GENERATED_HASH_IDS",
    "MAX_GENERATED_REQUESTS",
    "MAX_RESOLUTION_MS",
    "AgenticShape",
    "Capped",
    "ChatShape",
    "TraceEntry",
    "agentic_trace",
    "chat_trace",
    "check_arrivals",
    "check_block_size",
    "check_hash_ids",
    "check_requests",
    "check_resolution",
]

#: The share of :data:`~servelab.core.load.trace.MAX_TRACE_MS` a generated trace's expected span
#: may take: its random arrivals stay far below the cap.
_SPAN_SHARE = 0.01


def check_arrivals(count: int, rate: float) -> None:
    """Refuse ``count`` Poisson arrivals at ``rate`` per second whose expected span passes what a
    trace's instants may reach (:data:`~servelab.core.load.trace.MAX_TRACE_MS`): ``--rate
    1e-300`` would write timestamps no reader takes."""
    span_ms = max(count - 1, 1) / rate * 1e3
    if not span_ms <= MAX_TRACE_MS * _SPAN_SHARE:
        span = f"about {span_ms / 1e3:,.3g} s" if math.isfinite(span_ms) else "more than 1e308 s"
        raise TraceError(
            f"--rate {rate:g}: {count} arrivals at that rate span {span} "
            f"of trace time, past the {MAX_TRACE_MS * _SPAN_SHARE / 1e3:,.0f} s a generated "
            "trace may span"
        )


#: The coarsest resolution a generated trace's arrivals may be recorded at (a minute; Mooncake's
#: conversation trace records whole seconds): a coarser one puts whole bursts at one instant.
MAX_RESOLUTION_MS = 60_000


def check_resolution(resolution_ms: int) -> None:
    """Refuse a ``--resolution-ms`` outside 1 to :data:`MAX_RESOLUTION_MS`."""
    if not 1 <= resolution_ms <= MAX_RESOLUTION_MS:
        raise TraceError(
            f"--resolution-ms {resolution_ms}: arrivals are recorded at 1 to "
            f"{MAX_RESOLUTION_MS:,} ms (a minute)"
        )


#: The most requests a generated trace may hold (agentic: sessions × their most turns): more
#: than a replay takes in one window (:data:`~servelab.core.load.trace.MAX_WINDOW_REQUESTS`),
#: far less than ``--requests 100000000`` would write.
MAX_GENERATED_REQUESTS = 1_000_000


def check_requests(option: str, count: int, per: int = 1) -> None:
    """Refuse ``count`` (``--requests``, ``--sessions`` of ``per`` turns at most) over
    :data:`MAX_GENERATED_REQUESTS` requests."""
    if count * per > MAX_GENERATED_REQUESTS:
        turns = f" of up to {per} turns" if per > 1 else ""
        raise TraceError(f"{option} {count:,}{turns}: a generated trace holds at most "
                         f"{MAX_GENERATED_REQUESTS:,} requests")  # fmt: skip


#: The most hash ids a generated trace may hold, at most (each request's prompt at its token cap):
#: about 2 GB of lines. A hash id names a block of ``--block-size`` tokens, so ``--block-size 1``
#: within the request cap would write one per token (~28 GB, 65,536 a line).
MAX_GENERATED_HASH_IDS = 200_000_000


def check_hash_ids(option: str, requests: int, block_size: int, cap: int) -> None:
    """Refuse a trace whose ``requests`` (``option``: the count that sets them), each a prompt
    of up to ``cap`` tokens in blocks of ``block_size``, may hold more than
    :data:`MAX_GENERATED_HASH_IDS` hash ids, before a line is written."""
    most = requests * _blocks(cap, block_size)
    if most > MAX_GENERATED_HASH_IDS:
        raise TraceError(f"--block-size {block_size:,}: {requests:,} requests of up to {cap:,} "
                         f"tokens may take {most:,} hash ids, past the "
                         f"{MAX_GENERATED_HASH_IDS:,} hash ids a generated trace holds (about "
                         f"2 GB): raise --block-size or lower {option}")  # fmt: skip


def check_block_size(block_size: int, blocks: int, cap: int) -> None:
    """Refuse a ``--block-size`` whose shared prefix (``blocks`` of them) leaves no prompt under
    ``cap`` tokens: every request would be left out, an empty trace."""
    if blocks * block_size >= cap:
        raise TraceError(f"--block-size {block_size:,}: the {blocks} shared block(s) alone "
                         f"reach {blocks * block_size:,} tokens, past the {cap:,}-token prompt "
                         "cap: every request would be left out")  # fmt: skip


def _ms(at_s: float) -> int:
    """An arrival's timestamp (ms), checked against the cap every reader applies."""
    ms = round(at_s * 1e3)
    if ms > MAX_TRACE_MS:
        raise TraceError(f"an arrival at {at_s:,.3g} s is past the {MAX_TRACE_MS:g} ms cap")
    return ms


@dataclass(frozen=True, slots=True)
class AgenticShape:
    """Agent sessions: how many, how often they start (per second), turns each (uniform in
    ``turns``), the shared system prompt (whole blocks), each session's first message, what
    a turn adds (a tool result or a message), the answers, and the tool's time between turns;
    lengths are medians of log-normal draws (``spread``: their σ); a session ends early when its
    history would pass ``max_tokens``. Start times are recorded at ``resolution_ms`` (1000:
    whole seconds, as Mooncake's conversation trace records most of its arrivals: sessions that
    start in one second start at one instant, a burst)."""

    sessions: int = 8
    rate: float = 0.5
    turns: tuple[int, int] = (4, 8)
    system_blocks: int = 4
    first_tokens: float = 400
    added_tokens: float = 600
    output_tokens: float = 150
    delay_ms: float = 2000
    spread: float = 0.6
    max_tokens: int = 65_536
    block_size: int = DEFAULT_BLOCK_SIZE
    resolution_ms: int = 1


@dataclass(frozen=True, slots=True)
class ChatShape:
    """Single chat requests: how many, at what rate (per second), prompt and answer medians
    and their log-normal σ (the long tail), the caps, the popular system prompts (each
    ``system_blocks`` blocks, chosen by Zipf's law of exponent 1) and how often one is used;
    arrivals recorded at ``resolution_ms`` (as :class:`AgenticShape`)."""

    requests: int = 200
    rate: float = 4.0
    input_tokens: float = 512
    input_spread: float = 1.0
    output_tokens: float = 128
    output_spread: float = 0.8
    max_input: int = 16_384
    max_output: int = 2048
    system_prompts: int = 8
    system_blocks: int = 2
    system_share: float = 0.5
    block_size: int = DEFAULT_BLOCK_SIZE
    resolution_ms: int = 1


@dataclass
class Capped:
    """What a generation's caps changed, counted as its entries are drawn: answers cut to
    ``output_cap`` tokens, prompts cut to ``input_cap`` (chat), turns left out because an
    agent's history passed ``input_cap`` (agentic)."""

    output_cap: int = 0
    input_cap: int = 0
    outputs: int = 0
    inputs: int = 0
    turns: int = 0

    @property
    def any(self) -> bool:
        """Whether anything was capped."""
        return bool(self.outputs or self.inputs or self.turns)

    def count(self, what: str, n: int = 1) -> None:
        setattr(self, what, getattr(self, what) + n)


def _lognormal(
    rng: random.Random, median: float, spread: float, cap: int, capped: tuple[Capped, str] | None
) -> int:
    drawn = round(rng.lognormvariate(math.log(median), spread))
    if drawn > cap and capped is not None:
        capped[0].count(capped[1])
    return max(1, min(cap, drawn))


class _Ids:
    """Fresh hash ids, counted up from ``start``."""

    def __init__(self, start: int) -> None:
        self.next = start

    def take(self, n: int) -> list[int]:
        out = list(range(self.next, self.next + n))
        self.next += n
        return out


def _recorded(at_s: float, resolution_ms: int) -> int:
    """An arrival at ``at_s`` as a trace records it: ms, down to a multiple of the resolution."""
    return _ms(at_s) // resolution_ms * resolution_ms


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One line of a Mooncake trace as written: a session's turn (``session_id``; its first turn
    arrives at ``timestamp`` ms, the next ones a ``delay`` after the previous answer) or a lone
    request (``timestamp``), its lengths in tokens and the hash ids of its blocks. A field that is
    None is left out of the line."""

    session_id: Annotated[str | None, OMITTED_IF_NONE] = None
    timestamp: Annotated[int | None, OMITTED_IF_NONE] = None
    delay: Annotated[int | None, OMITTED_IF_NONE] = None
    input_length: int = 0
    output_length: int = 0
    hash_ids: tuple[int, ...] = ()


def _blocks(tokens: int, size: int) -> int:
    return -(-tokens // size)


def agentic_trace(
    shape: AgenticShape, *, seed: int, capped: Capped | None = None
) -> Iterator[TraceEntry]:
    """The entries of ``shape.sessions`` agent sessions, each session's turns consecutive (what
    the caps changed counted in ``capped``)."""
    tally = Capped() if capped is None else capped
    tally.output_cap = tally.input_cap = shape.max_tokens
    rng = random.Random(seed)
    size = shape.block_size
    system = list(range(shape.system_blocks))
    ids = _Ids(shape.system_blocks)
    start_s = 0.0
    for n in range(shape.sessions):
        if n:
            start_s += rng.expovariate(shape.rate)
        length = shape.system_blocks * size
        full = list(system)  # the ids of the history's full blocks, in order
        added = _lognormal(rng, shape.first_tokens, shape.spread, shape.max_tokens, None)
        planned = rng.randint(*shape.turns)
        for turn in range(planned):
            prompt = length + added
            if prompt > shape.max_tokens:
                tally.count("turns", planned - turn)
                break  # the history no longer fits: the agent starts over elsewhere
            hash_ids = full + ids.take(_blocks(prompt, size) - len(full))
            output = _lognormal(
                rng, shape.output_tokens, shape.spread, shape.max_tokens, (tally, "outputs")
            )
            delay = (
                round(rng.lognormvariate(math.log(shape.delay_ms), shape.spread)) if turn else None
            )
            at = None if turn else _recorded(start_s, shape.resolution_ms)
            yield TraceEntry(f"agent-{seed}-{n}", at, delay, prompt, output, tuple(hash_ids))
            length = prompt + output
            full = hash_ids[: prompt // size]
            added = _lognormal(rng, shape.added_tokens, shape.spread, shape.max_tokens, None)


def chat_trace(
    shape: ChatShape, *, seed: int, capped: Capped | None = None
) -> Iterator[TraceEntry]:
    """The entries of ``shape.requests`` single chat requests in time order (what the caps
    changed counted in ``capped``)."""
    tally = Capped() if capped is None else capped
    tally.output_cap, tally.input_cap = shape.max_output, shape.max_input
    rng = random.Random(seed)
    size = shape.block_size
    systems = [list(range(k * shape.system_blocks, (k + 1) * shape.system_blocks))
               for k in range(shape.system_prompts)]  # fmt: skip
    weights = [1.0 / (k + 1) for k in range(shape.system_prompts)]
    ids = _Ids(shape.system_prompts * shape.system_blocks)
    at_s = 0.0
    for n in range(shape.requests):
        if n:
            at_s += rng.expovariate(shape.rate)
        prompt = _lognormal(
            rng, shape.input_tokens, shape.input_spread, shape.max_input, (tally, "inputs")
        )
        prefix: list[int] = []
        if systems and rng.random() < shape.system_share:
            prefix = rng.choices(systems, weights)[0]
            prompt = max(prompt, len(prefix) * size + 1)
        hash_ids = prefix + ids.take(_blocks(prompt, size) - len(prefix))
        output = _lognormal(
            rng, shape.output_tokens, shape.output_spread, shape.max_output, (tally, "outputs")
        )
        at = _recorded(at_s, shape.resolution_ms)
        yield TraceEntry(None, at, None, prompt, output, tuple(hash_ids))
