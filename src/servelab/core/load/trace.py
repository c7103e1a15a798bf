"""Recorded traces (pure): the Mooncake JSONL format, its conversations, and their prompts.

One JSON object a line, as Mooncake (FAST'25) publishes its traces and aiperf replays them:

- ``timestamp``: when the request arrived, in ms (for a conversation: its first turn);
- ``input_length``, ``output_length``: prompt and output tokens;
- ``hash_ids``: one id per block of ``block_size`` prompt tokens (Mooncake's and aiperf's 512):
  two prompts whose ids agree up to block k share their first k blocks, so an engine's prefix
  cache sees what it saw when the trace was recorded;
- ``session_id`` and ``delay`` (optional): the turns of one conversation, its lines consecutive in
  the file; a later turn has no ``timestamp`` but a ``delay``, the ms its user waited after the
  previous answer (an agent's tool call, a person's thinking).

:class:`TraceReader` reads the lines one at a time (``feed``/``flush``) and hands out whole
:class:`TraceSession` s, so a trace of any length is replayed with only the conversations in flight
in memory. :class:`PromptBuilder` turns a turn's ids into words: every id always becomes the same
``block_size`` words (drawn from :data:`~servelab.core.load.workload.WORDS` by the SHAKE-128 digest
of the seed and the id), one word ≈ one token, so equal ids give equal prefixes. A prompt longer
than its ids cover is completed with words of its own.

A later turn of a conversation resends the previous prompt whole. Where that prompt ended inside a
block (its last id, partial), the trace gives the later turn a new id at that place (the block's
tokens changed: more of them), yet its first words are the partial block's: the builder carries
them over (:meth:`PromptBuilder.prompt` with ``before``), so the later prompt starts with every
character of the previous one, as a router that matches text (sglang-router's ``cache_aware``) and
an engine's prefix cache both see in a real conversation.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Literal, TypedDict

import orjson

from servelab.core.load.lengths import MAX_TOKENS
from servelab.core.load.workload import WORDS
from servelab.errors import TraceError

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "MAX_BURST",
    "MAX_BURST_TOKENS",
    "MAX_LINE_BYTES",
    "MAX_REPLAY_S",
    "MAX_TRACE_MS",
    "MAX_WINDOW_REQUESTS",
    "PromptBuilder",
    "TraceLine",
    "TracePlan",
    "TraceReader",
    "TraceSession",
    "TraceTurn",
    "TraceWindow",
    "check_replay",
    "replay_seconds",
    "session_offsets_ns",
]

#: Tokens per hash id when the trace does not say otherwise: Mooncake's, and aiperf's default.
DEFAULT_BLOCK_SIZE = 512
#: The word each byte value draws (the list repeated to 256: a few words are a little likelier).
_BY_BYTE = tuple(WORDS[i % len(WORDS)] for i in range(256))


_NOT_JSON_NUMBERS = re.compile(rb"[:\[,]\s*-?(NaN|Infinity)\b")


def _why(raw: bytes | str) -> str:
    """Why a line is not JSON, when it is a likely slip: a NaN or an Infinity (no JSON number)."""
    data = raw.encode("utf-8", "replace") if isinstance(raw, str) else raw
    found = _NOT_JSON_NUMBERS.search(data)
    return f" ({found.group(1).decode()} is not a JSON number)" if found else ""


@dataclass(frozen=True, slots=True)
class TraceTurn:
    """One request of a trace: its sizes, its blocks' ids, and (a later turn of a conversation)
    the ms its user waited after the previous answer; ``line``, its line in the file."""

    input_length: int
    output_length: int
    hash_ids: tuple[int, ...] = ()
    delay_ms: float = 0.0
    line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class TraceSession:
    """A conversation, or one lone request (``session`` None): its first turn's ``start_ms``,
    its turns in order, its place in the file (``ordinal``: conversations and lone requests
    counted alike, from 0) and ``line`` (its first line, from 1)."""

    start_ms: float
    turns: tuple[TraceTurn, ...]
    session: str | None
    ordinal: int
    line: int


@dataclass(frozen=True, slots=True)
class TraceWindow:
    """The part of a trace to replay: conversations starting in ``[start_s, end_s)`` of trace
    time (its ``timestamp`` s in seconds; ``end_s`` None: to the end)."""

    start_s: float = 0.0
    end_s: float | None = None

    def __post_init__(self) -> None:
        if self.start_s < 0 or (self.end_s is not None and self.end_s <= self.start_s):
            raise ValueError(f"a window is START:END with 0 ≤ START < END, got {self}")

    def holds(self, session: TraceSession) -> bool:
        """Whether ``session`` starts inside the window."""
        at = session.start_ms / 1e3
        return at >= self.start_s and (self.end_s is None or at < self.end_s)


@dataclass(frozen=True, slots=True)
class TracePlan:
    """A trace replay as asked: the file, its block size (tokens per hash id), how many times
    faster than recorded, and the window of it."""

    path: str
    block_size: int = DEFAULT_BLOCK_SIZE
    speedup: float = 1.0
    window: TraceWindow = TraceWindow()

    def __post_init__(self) -> None:
        if self.block_size < 1 or not 0 < self.speedup < math.inf:
            raise ValueError("a trace's block size must be ≥ 1 and its speedup > 0 and finite")


#: The largest ``timestamp`` or ``delay`` a line may give, in ms (about 317 years: epoch
#: milliseconds fit), so that every instant computed from them is a finite 64-bit number.
MAX_TRACE_MS = 1e13
#: The longest a replay may take (its conversations' starts and their delays, over the
#: speedup): a week. A schedule past it is a mistake (a timestamp of 1e308, a delay of 1e300,
#: ``--speedup 1e-300``) that would wait forever; it is refused before any load.
MAX_REPLAY_S = 7 * 86_400.0
#: The most conversations that may start at one instant of a replay: a burst's requests are all
#: built and given a connection ahead of their instant, so a burst is held whole (a trace of
#: 300,000 requests on one timestamp grew past 2 GB before this bound).
MAX_BURST = 4096
#: The most prompt tokens the conversations starting at one instant of a replay may ask (their
#: first turns' ``input_length`` summed): a burst's prompts and bodies are built ahead of their
#: instant and held until answered, about 12 MB of the client's memory a million tokens (80
#: requests of 1,040,000 tokens on one timestamp grew past 1.1 GB before this bound), so this
#: keeps a burst's prompts under about 0.8 GB.
MAX_BURST_TOKENS = 64_000_000
#: The most requests a replayed window may hold (every request's record is kept for the run's
#: summary): a longer trace is replayed a ``--trace-window`` at a time.
MAX_WINDOW_REQUESTS = 200_000
#: The longest line a trace may have, in bytes (a line is read whole before it is parsed).
MAX_LINE_BYTES = 1 << 20
#: What a line's value may reach: lengths in tokens, instants in ms.
_CAPS = {"input_length": MAX_TOKENS, "output_length": MAX_TOKENS,
         "timestamp": MAX_TRACE_MS, "delay": MAX_TRACE_MS}  # fmt: skip
#: The UTF-8 byte order mark some editors write at the start of a file.
_BOM = b"\xef\xbb\xbf"


class TraceLine(TypedDict, total=False):
    """One line of a Mooncake trace: the fields read (the module docstring), as the format
    types them; a line's values are checked where read (:func:`_number`, :func:`_turn`), each
    error naming the line and the field."""

    timestamp: float
    input_length: int
    output_length: int
    hash_ids: list[int]
    session_id: str | int
    delay: float


_NumberKey = Literal["timestamp", "input_length", "output_length", "delay"]


def _number(
    entry: TraceLine, key: _NumberKey, line: int, *, whole: bool, least: int = 0
) -> float | None:
    value = entry.get(key)
    if value is None:
        return None
    kind_ok = type(value) is int if whole else type(value) in (int, float)
    if not kind_ok or value < least:
        expected = f"a whole number ≥ {least}" if whole else f"a number ≥ {least}"
        raise TraceError(f"line {line}: {key} must be {expected}, got {value!r}")
    if value > _CAPS[key]:
        unit, shown = ("tokens", f"{value:,}") if whole else ("ms", f"{value:g}")
        raise TraceError(f"line {line}: {key} {shown} is over {_CAPS[key]:,.0f} {unit}")
    return float(value)


def replay_seconds(span_ms: float, speedup: float) -> float:
    """How long a replay of ``span_ms`` of trace time takes at ``speedup``."""
    return span_ms / 1e3 / speedup


def check_replay(span_ms: float, speedup: float) -> None:
    """Refuse a replay that would take longer than :data:`MAX_REPLAY_S` (its span: from its
    first conversation's start to the last instant its starts and delays name)."""
    seconds = replay_seconds(span_ms, speedup)
    if not seconds <= MAX_REPLAY_S:
        raise TraceError(
            f"the replay would take {seconds:,.3g} s ({span_ms / 1e3:,.3g} s of trace time at "
            f"speedup {speedup:g}), over the {MAX_REPLAY_S / 86_400:g}-day cap: raise "
            "--speedup or choose a --trace-window"
        )


def _turn(entry: TraceLine, line: int) -> TraceTurn:
    # a prompt has a token at least (``0.0``, ``true``, ``-1`` alike: "a whole number ≥ 1")
    sizes = [_number(entry, "input_length", line, whole=True, least=1),
             _number(entry, "output_length", line, whole=True)]  # fmt: skip
    if sizes[0] is None:
        raise TraceError(f"line {line}: input_length (a whole number ≥ 1) is required")
    ids = entry.get("hash_ids") or []
    if not isinstance(ids, list) or any(type(i) is not int for i in ids):
        raise TraceError(f"line {line}: hash_ids must be a list of whole numbers")
    return TraceTurn(
        input_length=int(sizes[0]),
        output_length=max(int(sizes[1] or 1), 1),
        hash_ids=tuple(ids),
        delay_ms=_number(entry, "delay", line, whole=False) or 0.0,
        line=line,
    )


class TraceReader:
    """Lines in (``feed``), whole conversations out: a lone request as soon as its line is read,
    a conversation when a line of another one (or ``flush``, at the end) shows it is complete.

    Conversations start in the order of the file; each start needs a ``timestamp`` (a lone
    request too). Ids of the sessions already handed out are kept to refuse a conversation whose
    turns are not consecutive.
    """

    def __init__(self) -> None:
        self._line = 0
        self._ordinal = 0
        self._open: tuple[str, float, int, list[TraceTurn]] | None = None
        self._done: set[str] = set()

    @property
    def lines(self) -> int:
        """Lines read so far (blank ones included)."""
        return self._line

    def feed(self, raw: bytes | str) -> list[TraceSession]:
        """Read one line; what it completed."""
        self._line += 1
        if self._line == 1:
            raw = raw.removeprefix(_BOM) if isinstance(raw, bytes) else raw.removeprefix("\ufeff")
        if not raw.strip():
            return []
        try:
            entry: TraceLine = orjson.loads(raw)  # checked below, field by field
        except orjson.JSONDecodeError:
            raise TraceError(f"line {self._line}: not a JSON object{_why(raw)}") from None
        if not isinstance(entry, dict):
            raise TraceError(f"line {self._line}: not a JSON object")
        turn = _turn(entry, self._line)
        name = entry.get("session_id")
        session = None if name is None else str(name)
        if self._open is not None and session == self._open[0]:
            self._open[3].append(turn)
            return []
        out = self.flush()
        if session is not None and session in self._done:
            raise TraceError(f"line {self._line}: the turns of session {session!r} are not "
                             "consecutive lines")  # fmt: skip
        start = _number(entry, "timestamp", self._line, whole=False)
        if start is None:
            raise TraceError(f"line {self._line}: the first turn of a request needs a timestamp")
        if session is None:
            out.append(self._session(start, [turn], None, self._line))
        else:
            self._open = (session, start, self._line, [turn])
        return out

    def flush(self) -> list[TraceSession]:
        """The conversation still open (at the end of the file), if any."""
        if self._open is None:
            return []
        session, start, line, turns = self._open
        self._open = None
        self._done.add(session)
        return [self._session(start, turns, session, line)]

    def _session(
        self, start: float, turns: list[TraceTurn], session: str | None, line: int
    ) -> TraceSession:
        found = TraceSession(start, tuple(turns), session, self._ordinal, line)
        self._ordinal += 1
        return found


def session_offsets_ns(
    sessions: Iterator[TraceSession], speedup: float
) -> Iterator[tuple[int, TraceSession]]:
    """Each session with its start as an offset (ns) from the first one's, ``speedup`` times
    faster than recorded; a start earlier than the one before it goes at the same offset (the
    replay never goes back in time)."""
    first: float | None = None
    last = 0
    for session in sessions:
        if first is None:
            first = session.start_ms
        last = max(last, round((session.start_ms - first) * 1e6 / speedup))
        yield last, session


class PromptBuilder:
    """A turn's prompt from its ids: each id is always the same ``block_size`` words (drawn by
    SHAKE-128 of the seed and the id; a block that continues a conversation's partial block
    starts with that block's words); the most recently used blocks are kept (``cache_blocks``),
    their words and their text, and the continuations seen (``cache_blocks`` × 16 of them)."""

    def __init__(self, block_size: int, seed: int, cache_blocks: int = 4096) -> None:
        if block_size < 1:
            raise ValueError(f"block size must be ≥ 1, got {block_size}")
        self.block_size = block_size
        self.seed = seed
        self._cache: OrderedDict[int, tuple[list[str], str]] = OrderedDict()
        self._cache_blocks = cache_blocks
        #: id → (the partial block it continues, how many of that block's words it starts with)
        self._carried: OrderedDict[int, tuple[int, int]] = OrderedDict()

    def _words(self, key: str, n: int) -> list[str]:
        """``n`` words, one per byte of the digest (a byte names a word of :data:`_BY_BYTE`)."""
        if n == 1:
            return [_BY_BYTE[hashlib.shake_128(f"{self.seed}:{key}".encode()).digest(1)[0]]]
        return list(
            itemgetter(*hashlib.shake_128(f"{self.seed}:{key}".encode()).digest(n))(_BY_BYTE)
        )

    def _block(self, hash_id: int) -> tuple[list[str], str]:
        found = self._cache.get(hash_id)
        if found is None:
            words = self._words(f"block:{hash_id}", self.block_size)
            carried = self._carried.get(hash_id)
            if carried is not None:
                words[: carried[1]] = self._block(carried[0])[0][: carried[1]]
            found = self._cache[hash_id] = (words, " ".join(words))
            if len(self._cache) > self._cache_blocks:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(hash_id)
        return found

    def _carry(self, before: TraceTurn, turn: TraceTurn) -> None:
        """Note that ``turn`` resends ``before`` (the previous turn of its conversation): when
        ``before`` ended inside its last block and ``turn`` has a new id in that place, the new
        block starts with the words ``before`` had there."""
        size = self.block_size
        shared = 0
        for mine, theirs in zip(before.hash_ids, turn.hash_ids, strict=False):
            if mine != theirs:
                break
            shared += 1
        carried = min(before.input_length, len(before.hash_ids) * size) - shared * size
        partial = shared + 1 == len(before.hash_ids) and shared < len(turn.hash_ids)
        if not partial or not 0 < carried < size:
            return
        new = turn.hash_ids[shared]
        if new not in self._carried and new not in self._cache:
            self._carried[new] = (before.hash_ids[shared], carried)
            if len(self._carried) > self._cache_blocks * 16:
                self._carried.popitem(last=False)

    def prompt(self, turn: TraceTurn, own: int, before: TraceTurn | None = None) -> str:
        """``turn.input_length`` words: its blocks in order, the last one cut to fit, then words
        of its own (drawn for ``own``, the request's place in the trace) where the ids run out.
        ``before`` is the previous turn of its conversation: the partial block it ended inside is
        carried over (:meth:`_carry`)."""
        if before is not None:
            self._carry(before, turn)
        parts: list[str] = []
        need = turn.input_length
        for hash_id in turn.hash_ids:
            if need <= 0:
                break
            words, text = self._block(hash_id)
            parts.append(text if need >= len(words) else " ".join(words[:need]))
            need -= min(need, len(words))
        if need > 0:
            parts.append(" ".join(self._words(f"own:{own}", need)))
        return " ".join(parts)
