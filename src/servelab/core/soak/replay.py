"""The differential replay matrix: where does the same payload go from working to failing?

For a failure, the soak replays the failing payload and a minimal one through every hop, each
cell bounded by the idle timeout (:mod:`servelab.ops.soak.replay` sends them; this module is the
pure model and rule). The hops, innermost first (:class:`Hop`):

1. :attr:`Hop.PAIR`: straight to one prefill/decode pair, bypassing the router: the PD request the
   router itself sends (the same body to both, with ``bootstrap_host``/``bootstrap_port``/
   ``bootstrap_room``), one cell set per pair;
2. :attr:`Hop.ROUTER`: straight to the router (only when the entry point is not the router);
3. :attr:`Hop.FRESH`: through the entry point on a fresh connection;
4. :attr:`Hop.REUSED`: through the entry point on a reused connection (as many requests carried
   before as the failed one had), only when the failure was on a reused connection.

Each hop is tried streaming and not (the streaming cells decide, as the soak streams; the others
are read as evidence). :func:`locate` reads the layer: the first hop, from the
engines outwards, at which the failing payload fails after working at the hop inside it; a pair
that fails names its worker (the one common to every failing pair and absent from every working
one). When the minimal payload passes where the failing one fails, the failure depends on size and
the payload is bisected (:func:`bisect_next`, :func:`shrink`) through that hop.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from servelab.core.soak.layers import Layer
from servelab.core.soak.signatures import Outcome

__all__ = [
    "Bisection",
    "Cell",
    "Hop",
    "Located",
    "Matrix",
    "Payload",
    "Reason",
    "bisect_next",
    "locate",
    "shrink",
]


class Hop(StrEnum):
    """Where a cell's request goes, innermost first (the order :func:`locate` walks)."""

    PAIR = "pair"
    ROUTER = "router"
    FRESH = "entry_fresh"
    REUSED = "entry_reused"


class Payload(StrEnum):
    """Which payload a cell sends: the failure's, a minimal one, or one cut down to bisect."""

    FAILING = "failing"
    MINIMAL = "minimal"
    BISECT = "bisect"


class Reason(StrEnum):
    """Why the matrix located what it did (:attr:`Located.reason`)."""

    ENGINE_PAIR = "engine_pair"  # a direct PD replay fails: the engines (which worker)
    ROUTER = "router"  # every pair answers directly, the router fails the same payload
    PROXY = "proxy"  # the router answers, the entry point fails it on a fresh connection
    CONNECTION_REUSE = "connection_reuse"  # fresh works, a reused connection fails
    NOT_REPRODUCED = "not_reproduced"  # every hop answered the failing payload
    NO_PAIR_REPLAY = "no_pair_replay"  # the router fails, no pair could be replayed directly


#: Bisection stops when the working and failing sizes are this close (bytes) ...
BISECT_MIN_BYTES = 256
#: ... or after this many steps.
BISECT_MAX_STEPS = 4


@dataclass(frozen=True, slots=True)
class Cell:
    """One replay: hop, target, payload kind, streaming or not, and what came back.

    ``target`` is ``entry``, the router's service name, or ``PREFILL+DECODE`` for a pair;
    ``side`` (pairs only) the side that failed: ``prefill`` or ``decode``; ``first_byte_s`` the
    response head's time (None: none came).
    """

    hop: Hop
    target: str
    payload: Payload
    stream: bool
    payload_bytes: int
    outcome: Outcome
    status: int | None = None
    elapsed_s: float = 0.0
    first_byte_s: float | None = None
    received_bytes: int = 0
    detail: str = ""
    side: str = ""
    prefill: str = ""
    decode: str = ""

    @property
    def id(self) -> str:
        """``matrix.<hop>.<target>.<payload>.<stream|plain>`` (a bisect step: with its size)."""
        mode = "stream" if self.stream else "plain"
        size = f"{self.payload}{self.payload_bytes}" if self.payload == Payload.BISECT else ""
        return f"matrix.{self.hop}.{self.target}.{size or self.payload}.{mode}"

    @property
    def ok(self) -> bool:
        return self.outcome == Outcome.OK


@dataclass(frozen=True, slots=True)
class Bisection:
    """The payload size bisected through one hop: the largest that worked, the smallest that
    failed (None when no step of that kind ran), and the steps."""

    hop: Hop
    target: str
    ok_bytes: int | None
    fail_bytes: int | None
    steps: tuple[Cell, ...] = ()


@dataclass(frozen=True, slots=True)
class Located:
    """What the matrix says: the layer (None: none singled out), its worker, the hop, why."""

    layer: Layer | None
    worker: str | None
    hop: Hop | None
    reason: Reason
    failing: tuple[str, ...] = ()  # cell ids of the failing payload that failed there
    working: tuple[str, ...] = ()  # cell ids of the same payload that worked one hop inside
    size_dependent: bool = False


@dataclass(frozen=True, slots=True)
class Matrix:
    """Every cell, the bisection (if any), and the located layer; ``elapsed_s`` wall time."""

    cells: tuple[Cell, ...]
    located: Located
    bisection: Bisection | None = None
    elapsed_s: float = 0.0

    @property
    def layer(self) -> Layer | None:
        return self.located.layer

    @property
    def worker(self) -> str | None:
        return self.located.worker


def _at(cells: Sequence[Cell], hop: Hop, payload: Payload = Payload.FAILING) -> list[Cell]:
    return [c for c in cells if c.hop == hop and c.payload == payload]


def _guilty(pairs: list[Cell], role: str) -> str | None:
    """The one worker of ``role`` in every failing pair and in no working pair."""

    def of(c: Cell) -> str:
        return c.prefill if role == "prefill" else c.decode

    working = {of(c) for c in pairs if c.ok}
    common = {of(c) for c in pairs if not c.ok}
    if len(common) == 1 and not common & working:
        return common.pop()
    return None


def _pair_verdict(pairs: list[Cell], minimal: list[Cell]) -> Located:
    failing = [c for c in pairs if not c.ok]
    sides = {c.side for c in failing}
    side = "prefill" if sides == {"prefill"} else "decode" if "decode" in sides else "prefill"
    worker = _guilty(pairs, side) or _guilty(pairs, "decode" if side == "prefill" else "prefill")
    layer = Layer.PREFILL if side == "prefill" else Layer.DECODE_TRANSFER
    small = [c for c in minimal if c.ok and (not worker or worker in (c.prefill, c.decode))]
    ids = tuple(c.id for c in failing)
    working = tuple(c.id for c in [*pairs, *small] if c.ok)
    return Located(layer, worker, Hop.PAIR, Reason.ENGINE_PAIR, ids, working, bool(small))


#: The layer a failure first seen at a hop (outside the pairs) is in, and why.
_HOP_LAYERS = {
    Hop.ROUTER: (Layer.ROUTER, Reason.ROUTER),
    Hop.FRESH: (Layer.CLIENT_PROXY, Reason.PROXY),
    Hop.REUSED: (Layer.CLIENT_PROXY, Reason.CONNECTION_REUSE),
}


def _hop_verdict(cells: Sequence[Cell], hop: Hop, inner: list[Cell]) -> Located | None:
    here = _at(cells, hop)
    failed = [c for c in here if not c.ok]
    if not here or not failed:
        return None
    layer, reason = _HOP_LAYERS[hop]
    if not inner:
        return Located(None, None, hop, Reason.NO_PAIR_REPLAY, tuple(c.id for c in failed))
    small = any(c.ok for c in _at(cells, hop, Payload.MINIMAL))
    working = tuple(c.id for c in inner if c.ok)
    return Located(layer, None, hop, reason, tuple(c.id for c in failed), working, small)


def locate(cells: Sequence[Cell], *, stream: bool = True) -> Located:
    """The first hop, from the engines outwards, at which the failing payload fails.

    Only the cells of the soak's own mode decide (``stream``: the soak streams); the others are
    evidence to read, not to compare: a long answer not streamed gets no byte until its end, so
    it may pass the idle timeout where the same answer streamed is fine.
    """
    cells = [c for c in cells if c.stream is stream]
    pairs = _at(cells, Hop.PAIR)
    if any(not c.ok for c in pairs):
        return _pair_verdict(pairs, _at(cells, Hop.PAIR, Payload.MINIMAL))
    inner = pairs
    for hop in (Hop.ROUTER, Hop.FRESH, Hop.REUSED):
        verdict = _hop_verdict(cells, hop, inner)
        if verdict is not None:
            return verdict
        inner = _at(cells, hop) or inner
    ok = tuple(c.id for c in cells if c.ok)
    return Located(None, None, None, Reason.NOT_REPRODUCED, (), ok)


def bisect_next(ok_bytes: int, fail_bytes: int, steps: int) -> int | None:
    """The next payload size to try between a working and a failing one (None: done)."""
    if steps >= BISECT_MAX_STEPS or abs(fail_bytes - ok_bytes) <= BISECT_MIN_BYTES:
        return None
    return (ok_bytes + fail_bytes) // 2


def _size(body: dict[str, Any]) -> int:
    return len(json.dumps(body).encode())


def shrink(body: dict[str, Any], limit: int) -> dict[str, Any]:
    """``body`` cut down to about ``limit`` bytes: the oldest turns dropped (system and tools
    kept, no tool result left without its call), then the last turn's text truncated."""
    messages = [dict(m) for m in body.get("messages", [])]
    system = [m for m in messages if m.get("role") == "system"]
    turns = [m for m in messages if m.get("role") != "system"]
    out = dict(body)
    while len(turns) > 1 and _size(out | {"messages": system + turns}) > limit:
        turns.pop(0)
        while len(turns) > 1 and turns[0].get("role") in ("tool", "assistant"):
            turns.pop(0)
    out["messages"] = system + turns
    last = turns[-1] if turns else None
    if last is not None and isinstance(last.get("content"), str):
        excess = _size(out) - limit
        if excess > 0:
            last["content"] = last["content"][: max(1, len(last["content"]) - excess)]
    return out
