"""The differential replay matrix: where does the same payload go from working to failing?

For a failure, the soak replays the failing payload and a minimal one through every hop, each
cell bounded by the idle timeout (:mod:`servelab.ops.soak.replay` sends them; this module is the
pure model and rule). A streamed cell is judged by the idle timeout,
a non-streamed one by a deadline from its expected answer (:mod:`servelab.core.soak.clock`); a
cell that cannot be judged is undecided and left out. The hops, innermost first (:class:`Hop`):

1. :attr:`Hop.PAIR`: straight to one prefill/decode pair, bypassing the router: the PD request the
   router itself sends (the same body to both, with ``bootstrap_host``/``bootstrap_port``/
   ``bootstrap_room``), one cell set per pair;
2. :attr:`Hop.ROUTER`: straight to the router (only when the entry point is not the router);
3. :attr:`Hop.FRESH`: through the entry point on a fresh connection;
4. :attr:`Hop.REUSED`: through the entry point on a reused connection (as many requests carried
   before, and as long idle, as the failed one had), only when the failure was on a reused
   connection.

Each hop is tried streaming and not. :func:`locate` reads the layer: the first hop, from the
engines outwards, at which a payload fails after working at the hop inside it, read in this
order: the failing payload streamed, sent alone (the soak streams); the failing payload under
the load the failure met (:attr:`Payload.LOADED`: as many copies at once as the soak had in
flight); a stream a hop holds (:func:`held`: it arrives, but its first token or a gap far later
than at the hop inside); then every other cell (not streamed, the minimal payload): every failed
cell is evidence, and a failed cell the located hop does not explain is listed as conflicting. A
pair that fails names its worker (the one common to every failing pair and absent from every
working one). What the failure depends on (:class:`Dependence`) is decided at the located hop by
probes that each vary one thing (:func:`dependence`): the prompt (:attr:`Payload.SMALL_PROMPT`)
or the answer's length (:attr:`Payload.SHORT_ANSWER`); a size-dependent failure is then bisected
(:func:`bisect_next`, :meth:`~servelab.core.soak.body.ChatBody.shrunk`) through that hop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from servelab.core.soak.body import ChatBody
from servelab.core.soak.clock import Clock
from servelab.core.soak.signatures import Outcome
from servelab.core.telemetry.layers import Layer

__all__ = [
    "HOLD_MIN_S",
    "Bisection",
    "Cell",
    "Dependence",
    "Hop",
    "Located",
    "Matrix",
    "Payload",
    "Reason",
    "bisect_next",
    "dependence",
    "held",
    "locate",
    "varied",
]


class Hop(StrEnum):
    """Where a cell's request goes, innermost first (the order :func:`locate` walks)."""

    PAIR = "pair"
    ROUTER = "router"
    FRESH = "entry_fresh"
    REUSED = "entry_reused"


class Payload(StrEnum):
    """Which payload a cell sends: the failure's, a minimal one, one cut down to bisect, the
    failure's at the load it met, or a probe that varies one thing of it (the prompt: the minimal
    prompt with the failure's answer length; the answer: the failure's prompt with a one-token
    answer; the rate: the failure's payload alone after a pause)."""

    FAILING = "failing"
    MINIMAL = "minimal"
    BISECT = "bisect"
    LOADED = "loaded"
    SMALL_PROMPT = "small_prompt"
    SHORT_ANSWER = "short_answer"
    SPACED = "spaced"


class Reason(StrEnum):
    """Why the matrix located what it did (:attr:`Located.reason`)."""

    ENGINE_PAIR = "engine_pair"  # a direct PD replay fails: the engines (which worker)
    ROUTER = "router"  # every pair answers directly, the router fails the same payload
    PROXY = "proxy"  # the router answers, the entry point fails it on a fresh connection
    CONNECTION_REUSE = "connection_reuse"  # fresh works, a reused connection fails
    NOT_REPRODUCED = "not_reproduced"  # every hop answered the failing payload
    NO_PAIR_REPLAY = "no_pair_replay"  # the router fails, no pair could be replayed directly
    HELD = "held"  # every hop answers, but one holds the stream the hop inside it streams


class Dependence(StrEnum):
    """What a located failure depends on, by the probes that vary one thing at its hop."""

    SIZE = "size"  # the prompt: the small prompt with the same answer length gets through
    LENGTH = "length"  # the answer: the same prompt with a short answer gets through
    SIZE_AND_LENGTH = "size_and_length"  # either change alone gets it through
    NEITHER = "neither"  # it fails with the small prompt and with the short answer too
    LOAD = "load"  # alone, or after a pause, it gets through: it fails at the load it met


#: A stream is held when its first token comes this much later than at the hop inside (and at
#: least twice as late), or a gap between two tokens grows this much (and at least threefold).
HOLD_MIN_S = 0.3


#: Bisection stops when the working and failing sizes are this close (bytes) ...
BISECT_MIN_BYTES = 256
#: ... or after this many steps.
BISECT_MAX_STEPS = 4


@dataclass(frozen=True, slots=True)
class Cell:
    """One replay: hop, target, payload kind, streaming or not, and what came back.

    ``target`` is ``entry``, the router's service name, or ``PREFILL+DECODE`` for a pair;
    ``side`` (pairs only) the side that failed: ``prefill`` or ``decode``; ``first_byte_s`` the
    response head's time (None: none came); ``first_event_s`` the first streamed event's and
    ``max_gap_s`` the longest wait between two (None: not streamed, or none came). A
    :attr:`Payload.LOADED` cell stands for ``copies`` requests sent at once, ``failed_copies`` of
    which failed (the first failed one's outcome is the cell's). ``idle_s``: how long its
    reused connection sat unused before it. ``server``: the answer's ``Server`` header;
    ``echoed_id``: whether the answer carried the request's ``x-request-id`` back (None: no
    head). ``clock``: what judged it (:mod:`servelab.core.soak.clock`: a stream by the idle
    timeout, a non-streamed answer by a deadline from its expected length); ``deadline_s`` that
    deadline (None: none). An :attr:`undecided` cell is evidence of nothing.
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
    first_event_s: float | None = None
    max_gap_s: float | None = None
    copies: int = 1
    failed_copies: int = 0
    idle_s: float = 0.0
    server: str = ""
    echoed_id: bool | None = None
    clock: Clock = Clock.IDLE
    deadline_s: float | None = None

    @property
    def undecided(self) -> bool:
        """It could not be judged (not streamed, no deadline known, no answer in time)."""
        return self.clock == Clock.UNDECIDED

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
    """What the matrix says: the layer (None: none singled out), its worker, the hop, why, what
    the failure depends on (None: not decided), and the load it took (``load`` copies at once,
    when it fails only under load)."""

    layer: Layer | None
    worker: str | None
    hop: Hop | None
    reason: Reason
    failing: tuple[str, ...] = ()  # cell ids that failed (or were held) there
    working: tuple[str, ...] = ()  # cell ids of the same payloads that worked one hop inside
    dependence: Dependence | None = None
    load: int | None = None
    conflicting: tuple[str, ...] = ()  # failed cells the located hop does not explain

    @property
    def size_dependent(self) -> bool:
        return self.dependence == Dependence.SIZE


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


def _pair_verdict(pairs: list[Cell]) -> Located:
    failing = [c for c in pairs if not c.ok]
    sides = {c.side for c in failing}
    side = "prefill" if sides == {"prefill"} else "decode" if "decode" in sides else "prefill"
    worker = _guilty(pairs, side) or _guilty(pairs, "decode" if side == "prefill" else "prefill")
    layer = Layer.PREFILL if side == "prefill" else Layer.DECODE_TRANSFER
    ids = tuple(c.id for c in failing)
    return Located(
        layer, worker, Hop.PAIR, Reason.ENGINE_PAIR, ids, tuple(c.id for c in pairs if c.ok)
    )


#: The layer a failure first seen at a hop (outside the pairs) is in, and why.
_HOP_LAYERS = {
    Hop.ROUTER: (Layer.ROUTER, Reason.ROUTER),
    Hop.FRESH: (Layer.CLIENT_PROXY, Reason.PROXY),
    Hop.REUSED: (Layer.CLIENT_PROXY, Reason.CONNECTION_REUSE),
}
_OUTER = (Hop.ROUTER, Hop.FRESH, Hop.REUSED)
_ORDER = (Hop.PAIR, *_OUTER)


def _walk(cells: Sequence[Cell], payload: Payload) -> Located | None:
    """The first hop, from the engines outwards, at which ``payload`` fails (None: nowhere)."""
    pairs = _at(cells, Hop.PAIR, payload)
    if any(not c.ok for c in pairs):
        return _pair_verdict(pairs)
    inner = pairs
    for hop in _OUTER:
        here = _at(cells, hop, payload)
        failed = [c for c in here if not c.ok]
        if failed:
            if not inner:
                return Located(None, None, hop, Reason.NO_PAIR_REPLAY, tuple(c.id for c in failed))
            layer, reason = _HOP_LAYERS[hop]
            ok = tuple(c.id for c in inner if c.ok)
            return Located(layer, None, hop, reason, tuple(c.id for c in failed), ok)
        inner = here or inner
    return None


def held(cell: Cell, inner: Cell) -> bool:
    """``cell`` arrived but its hop held the stream that ``inner`` (the same payload one hop
    inside) streamed: its first token :data:`HOLD_MIN_S` later (and at least twice as late), or
    its longest gap that much longer (and at least three times as long)."""
    if not (cell.ok and inner.ok and cell.stream and inner.stream):
        return False
    if cell.first_event_s is None or inner.first_event_s is None:
        return False
    first, inner_first = cell.first_event_s, inner.first_event_s
    gap, inner_gap = cell.max_gap_s or 0.0, inner.max_gap_s or 0.0
    late = first - inner_first > max(HOLD_MIN_S, inner_first)
    stretched = gap - inner_gap > max(HOLD_MIN_S, 2 * inner_gap)
    return late or stretched


def _held_verdict(cells: Sequence[Cell]) -> Located | None:
    """The first hop, from the router outwards, that holds the failing payload's stream."""
    inner = _at(cells, Hop.PAIR)
    for hop in _OUTER:
        here = _at(cells, hop)
        found = [c for c in here if any(held(c, i) for i in inner)]
        if found:
            layer = _HOP_LAYERS[hop][0]
            ok = tuple(c.id for c in inner)
            return Located(layer, None, hop, Reason.HELD, tuple(c.id for c in found), ok)
        inner = here or inner
    return None


#: The order the cells are read in after the failing payload alone, under load and held.
_OTHERS = (Payload.FAILING, Payload.MINIMAL)


def _explained(cells: Sequence[Cell], loc: Located) -> Located:
    """Every failed cell counts: at the located hop, one whose payload worked one hop inside
    joins its failing cells; one outside it is explained by it (a failure inside shows outside
    too); any other (inside it, or at it while the hop inside failed too) is conflicting."""
    assert loc.hop is not None
    failing, working, conflicting = list(loc.failing), list(loc.working), []
    for c in cells:
        if c.ok or c.id in failing or c.payload == Payload.BISECT:
            continue
        if _ORDER.index(c.hop) > _ORDER.index(loc.hop):
            continue
        inside = _inside(cells, c)
        if c.hop == loc.hop and (c.hop == Hop.PAIR or (inside and all(i.ok for i in inside))):
            failing.append(c.id)
            working += [i.id for i in inside if i.id not in working]
        else:
            conflicting.append(c.id)
    return replace(
        loc, failing=tuple(failing), working=tuple(working), conflicting=tuple(conflicting)
    )


def _inside(cells: Sequence[Cell], cell: Cell) -> list[Cell]:
    """The cells of the same payload and mode one hop inside ``cell``'s (nearest that has any)."""
    for hop in reversed(_ORDER[: _ORDER.index(cell.hop)]):
        found = [
            c
            for c in cells
            if c.hop == hop and c.payload == cell.payload and c.stream is cell.stream
        ]
        if found:
            return found
    return []


def locate(cells: Sequence[Cell]) -> Located:
    """The first hop, from the engines outwards, at which the same payload goes from working to
    failing: the failing payload streamed alone first (the soak streams), then at the load it
    met (:attr:`Dependence.LOAD`, with the copies it took), then a held stream, then every other
    cell (not streamed, minimal); every failed cell is counted (see the module docstring). An
    undecided cell (:attr:`Cell.undecided`) is left out: it shows neither way."""
    cells = [c for c in cells if not c.undecided]
    streamed = [c for c in cells if c.stream]
    found = _walk(streamed, Payload.FAILING)
    if found is None:
        loaded = _walk(streamed, Payload.LOADED)
        if loaded is not None and loaded.hop is not None:
            copies = max((c.copies for c in _at(cells, loaded.hop, Payload.LOADED)), default=None)
            found = replace(loaded, dependence=Dependence.LOAD, load=copies)
    found = found or _held_verdict(streamed)
    for payload in _OTHERS:
        found = found or _walk([c for c in cells if not c.stream], payload)
        found = found or _walk(streamed, payload)
    if found is None:
        ok = tuple(c.id for c in cells if c.ok)
        return Located(None, None, None, Reason.NOT_REPRODUCED, (), ok)
    return _explained(cells, found) if found.hop is not None and found.layer else found


def dependence(cells: Sequence[Cell], loc: Located) -> Dependence | None:
    """What the failure depends on, from the probes at the located hop that vary one thing: the
    rate (the failing payload, unchanged, after a pause: when it gets through, the failure
    depends on what was sent before it, a load), else the prompt and the answer's length; None
    when the prompt and length probes did not both run there."""
    if loc.dependence is not None:
        return loc.dependence
    probes = {c.payload: c for c in cells if c.hop == loc.hop and c.stream}
    small, short = probes.get(Payload.SMALL_PROMPT), probes.get(Payload.SHORT_ANSWER)
    if small is None or short is None:
        return None
    spaced = probes.get(Payload.SPACED)
    if spaced is not None and spaced.ok and not _held_there(cells, spaced):
        return Dependence.LOAD  # the same payload, unchanged, gets through after a pause
    passes = {c.payload for c in (small, short) if c.ok and not _held_there(cells, c)}
    if passes == {Payload.SMALL_PROMPT}:
        return Dependence.SIZE
    if passes == {Payload.SHORT_ANSWER}:
        return Dependence.LENGTH
    return Dependence.SIZE_AND_LENGTH if passes else Dependence.NEITHER


def _held_there(cells: Sequence[Cell], probe: Cell) -> bool:
    """A probe that arrived held (against the same probe one hop inside) did not get through."""
    return any(held(probe, i) for i in _inside(cells, probe))


def bisect_next(ok_bytes: int, fail_bytes: int, steps: int) -> int | None:
    """The next payload size to try between a working and a failing one (None: done)."""
    if steps >= BISECT_MAX_STEPS or abs(fail_bytes - ok_bytes) <= BISECT_MIN_BYTES:
        return None
    return (ok_bytes + fail_bytes) // 2


def varied(failing: ChatBody, minimal: ChatBody, payload: Payload) -> ChatBody:
    """The probe that varies one thing of ``failing``: the prompt
    (:attr:`Payload.SMALL_PROMPT`: the minimal payload's messages, no tools, the same answer
    length) or the answer (:attr:`Payload.SHORT_ANSWER`: the same prompt, the minimal payload's
    answer length); any other payload is ``failing`` itself."""
    if payload == Payload.SMALL_PROMPT:
        return failing.prompt_of(minimal)
    if payload == Payload.SHORT_ANSWER:
        return failing.with_fields(max_tokens=1)
    return failing
