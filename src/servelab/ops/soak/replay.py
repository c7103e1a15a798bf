"""The differential replay matrix, sent: every cell of :mod:`servelab.core.soak.replay` over HTTP.

For one failure, in turns that never put the minimal payload in the same engine batch as the
failing one, nor a streamed request with one that is not: the failing payload streamed straight
to each prefill/decode pair (the PD request the router sends: SGLang's, the same body to both at
once, with ``bootstrap_host``/``bootstrap_port``/``bootstrap_room``; vLLM's, the NIXL prefill leg
with ``kv_transfer_params`` and then the decode leg with the params it answered), straight to the
router and through the
entry point on a fresh connection, all at once; then the same not streamed; then the minimal
payload the same two ways. When the failure was on a reused connection: one keep-alive connection
carrying as many requests first, left idle as long as the failed one's was, through a plain
client that never sends again. When that does not reproduce it and the failure met load, the
failing payload is sent at that load (as many copies at once as the soak had in flight), hop
after hop. At the hop located, the probes that vary one thing (the prompt, the answer's length)
are sent there and one hop inside, one at a time, and the failing payload unchanged after a pause
(the rate). A size-dependent failure is then bisected through that hop.
Every streamed request is bounded by the idle timeout, every non-streamed one by its deadline
(:mod:`servelab.core.soak.clock`; the idle timeout when none is known, a stall then undecided),
and goes through
:class:`~servelab.io.http.stream.StreamClient`; every turn after the first starts only while an
idle timeout still fits before the deadline. Each request's last turn opens with a marker of its
own, so no cell is served from the prefill of the cell before it (a prefix cache would otherwise
make the second sending of a payload faster than the first).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, replace
from time import perf_counter_ns
from typing import Any
from urllib.parse import urlsplit

from servelab.core.load.chat import KvTransferParams
from servelab.core.load.records import REASON_MALFORMED, RequestRecord
from servelab.core.soak.agentic import e2e_probe_body
from servelab.core.soak.body import ChatBody
from servelab.core.soak.clock import DecodeRate, clock_of, plain_deadline
from servelab.core.soak.deadlines import Deadlines
from servelab.core.soak.replay import (
    Bisection,
    Cell,
    Dependence,
    Hop,
    Located,
    Matrix,
    Payload,
    bisect_next,
    dependence,
    held,
    locate,
    varied,
)
from servelab.core.soak.result import Targets, WorkerTarget
from servelab.core.soak.signatures import Failure
from servelab.ops.soak.client import CHAT, Exchange, Headers, client, exchange

__all__ = ["holds", "pairs_of", "replay_matrix"]

_ROOM_BITS = 63
#: What vllm-router puts in a prefill leg (vllm-router 0.1.17, ``vllm_pd_router.rs``).
_REMOTE_DECODE: KvTransferParams = {
    "do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
    "remote_block_ids": None, "remote_host": None, "remote_port": None,
}  # fmt: skip


@dataclass(frozen=True)
class _Plan:
    """What every cell of one matrix shares: where, the payloads, the bounds."""

    targets: Targets
    failing: ChatBody
    minimal: ChatBody
    idle_s: float
    deadline: float
    headers: Headers = ()
    rate: DecodeRate | None = None  # the soak's own streams' decode rate (None: unknown)

    def bound(self, body: ChatBody) -> tuple[float, float | None]:
        """How long a request of ``body`` may go without a byte, and the deadline that judges
        it: a stream, the idle timeout (no deadline); a non-streamed answer, its deadline from
        its expected length (:func:`~servelab.core.soak.clock.plain_deadline`), else (no rate
        known, or the deadline does not fit before the matrix's own) the idle timeout, or what
        is left when more, with no deadline (a stall then is undecided)."""
        if body.stream:
            return self.idle_s, None
        deadline = plain_deadline(body.expected_tokens, self.rate)
        left = self.deadline - time.monotonic()
        if deadline is None or deadline > left:
            return max(self.idle_s, min(left, deadline or 0.0)), None
        return deadline, deadline

    def fits(self, turns: int = 1) -> bool:
        """``turns`` more idle timeouts fit before the deadline."""
        return time.monotonic() + turns * self.idle_s <= self.deadline

    def body(self, payload: Payload) -> ChatBody:
        return (
            self.minimal
            if payload == Payload.MINIMAL
            else varied(self.failing, self.minimal, payload)
        )


def pairs_of(targets: Targets) -> list[tuple[WorkerTarget, WorkerTarget]]:
    """Every (prefill, decode) pair that can be replayed directly (prefill bootstrap port known)."""
    prefills = [w for w in targets.workers if w.role == "prefill" and w.bootstrap_port]
    decodes = [w for w in targets.workers if w.role == "decode"]
    return [(p, d) for p in prefills for d in decodes]


def _body(body: ChatBody, stream: bool) -> ChatBody:
    """``body`` streamed or not, its last message's text opened by a marker no other request
    carries, so no cell rides on another's prefill in the prefix cache: each prefills its last
    turn as the failing request did (the earlier turns stay as cached as the soak left them).
    Without it, a timeout that only a long uncached prefill meets passes when the same payload
    is sent again (the cell before it cached it) and reads as load-dependent."""
    return body.uncached(f"[replay {random.getrandbits(48):012x}] ").streamed(stream)


def _cell(
    hop: Hop, target: str, payload: Payload, stream: bool, size: int, ex: Exchange, start: float,
    deadline: float | None = None,
) -> Cell:  # fmt: skip
    rec = ex.record
    head = None if rec.first_byte_ns is None else (rec.first_byte_ns - rec.sent_ns) / 1e9
    clock = clock_of(stream, ex.stalled, deadline)
    return Cell(
        hop, target, payload, stream, size, ex.outcome, rec.status, time.monotonic() - start,
        head, ex.received_bytes, ex.detail, first_event_s=ex.first_event_s,
        max_gap_s=ex.max_gap_s, server=ex.server, echoed_id=ex.echoed_id, clock=clock,
        deadline_s=None if deadline is None else round(deadline, 3),
    )  # fmt: skip


async def _send(
    url: str, body: ChatBody, plan: _Plan, bound: tuple[float, float | None] | None = None,
    proxy: str | None = None,
) -> Exchange:  # fmt: skip
    """One request on a fresh connection (through ``proxy`` if given), bounded by ``bound``
    (default :meth:`_Plan.bound`)."""
    limit, _ = plan.bound(body) if bound is None else bound
    async with client(url, limit, fresh=True, headers=plan.headers, proxy=proxy) as c:
        return await exchange(c, body.encoded(), -1, stream=body.stream)


def _url(plan: _Plan, hop: Hop) -> tuple[str, str, str | None]:
    """The URL, target name and forward proxy of an entry or router hop (the router's hop is
    straight; the entry's takes the forward proxy, if any)."""
    t = plan.targets
    if hop == Hop.ROUTER and t.router_url:
        return (t.router_url if t.via_proxy else t.entry_url), t.router_service, None
    return t.entry_url, "entry", t.proxy


async def _entry_cell(plan: _Plan, hop: Hop, payload: Payload, stream: bool) -> Cell:
    url, target, proxy = _url(plan, hop)
    sent = _body(plan.body(payload), stream)
    start, bound = time.monotonic(), plan.bound(sent)
    ex = await _send(url, sent, plan, bound, proxy)
    return _cell(hop, target, payload, stream, sent.size, ex, start, bound[1])


async def _reused_cell(plan: _Plan, carried: int, idle_s: float) -> Cell:
    """``carried`` minimal requests on one keep-alive connection, left idle ``idle_s``, then the
    failing payload, through a plain client (it never sends again: the close is the failure)."""
    sent = _body(plan.failing, True)
    url, proxy = plan.targets.entry_url, plan.targets.proxy
    async with client(
        url, plan.idle_s, fresh=False, headers=plan.headers, resend=False, proxy=proxy
    ) as c:
        for i in range(carried):
            await exchange(c, _body(plan.minimal, False).encoded(), i, stream=False)
        if idle_s > 0:
            await asyncio.sleep(idle_s)
        start = time.monotonic()
        ex = await exchange(c, sent.encoded(), carried)
    cell = _cell(Hop.REUSED, "entry", Payload.FAILING, True, sent.size, ex, start)
    return replace(cell, idle_s=round(idle_s, 3))


async def _prefill_leg(url: str, body: ChatBody, plan: _Plan) -> tuple[Exchange, Any]:
    """A vLLM prefill leg: the exchange and the ``kv_transfer_params`` its answer carries (None:
    it failed, or answered without them)."""
    record = RequestRecord(index=-1, scheduled_ns=perf_counter_ns())
    async with client(url, plan.idle_s, fresh=True, headers=plan.headers) as c:
        got = await c.transfer(CHAT, body.encoded(), record)
    ex = Exchange(record, got.received_bytes)
    if record.error is not None:
        return ex, None
    try:
        doc = json.loads(b"".join(data for _, data in got.chunks))
    except ValueError:
        doc = None
    params = doc.get("kv_transfer_params") if isinstance(doc, dict) else None
    if not isinstance(params, dict):
        record.fail(REASON_MALFORMED, "the prefill leg's answer has no kv_transfer_params")
        return ex, None
    return ex, params


async def _nixl_legs(
    prefill: WorkerTarget, decode: WorkerTarget, body: ChatBody, plan: _Plan,
    bound: tuple[float, float | None],
) -> tuple[Exchange, Exchange | None]:  # fmt: skip
    """vllm-router's hand-off, sent by hand: the prefill leg (one token, not streamed, asking for
    a remote decode), then the decode leg: the client's body with the params the prefill
    answered, which the decode pulls the KV with (no decode leg when the prefill failed)."""
    pre, params = await _prefill_leg(prefill.url, body.prefill_leg(_REMOTE_DECODE), plan)
    if params is None:
        return pre, None
    return pre, await _send(decode.url, body.with_fields(kv_transfer_params=params), plan, bound)


async def _pair_cell(
    plan: _Plan, pair: tuple[WorkerTarget, WorkerTarget], payload: Payload, stream: bool,
    body: ChatBody | None = None,
) -> Cell:  # fmt: skip
    """The router's PD request, sent by hand: SGLang's, the same body to prefill and decode at
    once; vLLM's, its two legs (:func:`_nixl_legs`)."""
    prefill, decode = pair
    sent = _body(plan.body(payload) if body is None else body, stream)
    start, bound = time.monotonic(), plan.bound(sent)
    dec: Exchange | None
    if plan.targets.engine == "vllm":
        pre, dec = await _nixl_legs(prefill, decode, sent, plan, bound)
    else:
        sent = sent.with_fields(
            bootstrap_host=urlsplit(prefill.url).hostname,
            bootstrap_port=prefill.bootstrap_port,
            bootstrap_room=random.getrandbits(_ROOM_BITS),
        )
        pre, dec = await asyncio.gather(
            _send(prefill.url, sent, plan, bound), _send(decode.url, sent, plan, bound)
        )
    failed, side = (dec, "decode") if pre.record.ok and dec is not None else (pre, "prefill")
    target = f"{prefill.service}+{decode.service}"
    cell = _cell(Hop.PAIR, target, payload, stream, sent.size, failed, start, bound[1])
    ok = pre.record.ok and dec is not None and dec.record.ok
    return replace(cell, side="" if ok else side, prefill=prefill.service, decode=decode.service)


def _hops(plan: _Plan) -> list[Hop]:
    """The URL hops: the router (straight, when the entry is a proxy) and the entry point."""
    t = plan.targets
    if not t.via_proxy:
        return [Hop.ROUTER]
    return [Hop.ROUTER, Hop.FRESH] if t.router_url else [Hop.FRESH]


def _turn(plan: _Plan, payload: Payload, stream: bool) -> Sequence[Awaitable[Cell]]:
    """Every hop's cell of ``payload``, streamed or not (sent at once: each hop meets the same
    load, so their timings compare)."""
    jobs = [_pair_cell(plan, pair, payload, stream) for pair in pairs_of(plan.targets)]
    return [*jobs, *(_entry_cell(plan, hop, payload, stream) for hop in _hops(plan))]


#: The matrix's turns after the first (the failing payload streamed), in order.
_TURNS = ((Payload.FAILING, False), (Payload.MINIMAL, True), (Payload.MINIMAL, False))


async def _loaded_cell(plan: _Plan, hop: Hop, copies: int) -> Cell:
    """``copies`` of the failing payload streamed at once through ``hop``: one cell, the first
    failed copy's outcome (or the first copy's), how many failed."""
    pairs = pairs_of(plan.targets)
    if hop == Hop.PAIR:
        pair = pairs[0]
        sent = [_pair_cell(plan, pair, Payload.LOADED, True, plan.failing) for _ in range(copies)]
        got = list(await asyncio.gather(*sent))
    else:
        got = [
            replace(c, payload=Payload.LOADED)
            for c in await asyncio.gather(
                *(_entry_cell(plan, hop, Payload.FAILING, True) for _ in range(copies))
            )
        ]
    failed = [c for c in got if not c.ok]
    first = failed[0] if failed else got[0]
    return replace(first, copies=copies, failed_copies=len(failed))


async def _under_load(plan: _Plan, copies: int) -> list[Cell]:
    """The failing payload at the load it met, hop after hop from the engines outwards (a hop's
    copies never share the engines with another hop's)."""
    hops = ([Hop.PAIR] if pairs_of(plan.targets) else []) + _hops(plan)
    cells = []
    for hop in hops:
        if not plan.fits():
            break
        cells.append(await _loaded_cell(plan, hop, copies))
    return cells


_INSIDE = {Hop.ROUTER: Hop.PAIR, Hop.FRESH: Hop.ROUTER}


#: How long the rate probe waits before it sends the failing payload, unchanged, once more.
SPACE_S = 2.0


async def _probe_cells(plan: _Plan, loc: Located, cells: Sequence[Cell]) -> list[Cell]:
    """The probes that vary one thing, at the located hop and one hop inside it, one at a time
    (so none shares an engine batch with another): the prompt, the answer's length, and the rate
    (the failing payload unchanged, after a pause)."""
    if loc.hop is None or loc.dependence is not None or loc.hop == Hop.REUSED:
        return []
    hops = [h for h in (_INSIDE.get(loc.hop), loc.hop) if h is not None]
    failed_pair = {c.target for c in cells if c.hop == Hop.PAIR and not c.ok}
    pair = next(
        (p for p in pairs_of(plan.targets) if f"{p[0].service}+{p[1].service}" in failed_pair),
        next(iter(pairs_of(plan.targets)), None),
    )
    probes: list[Cell] = []
    for payload in (Payload.SMALL_PROMPT, Payload.SHORT_ANSWER, Payload.SPACED):
        if payload == Payload.SPACED:
            await asyncio.sleep(SPACE_S)
        for hop in hops:
            if not plan.fits(2):
                return probes
            if hop == Hop.PAIR:
                if pair is not None:
                    probes.append(await _pair_cell(plan, pair, payload, True))
            elif hop in _hops(plan):
                probes.append(await _entry_cell(plan, hop, payload, True))
    return probes


async def _bisect_cell(plan: _Plan, loc: Located, cells: list[Cell], body: ChatBody) -> Cell | None:
    if loc.hop == Hop.PAIR:
        pair = next(
            (p for p in pairs_of(plan.targets) if f"{p[0].service}+{p[1].service}" in
             {c.target for c in cells if not c.ok}),
            None,
        )  # fmt: skip
        return None if pair is None else await _pair_cell(plan, pair, Payload.BISECT, True, body)
    if loc.hop not in (Hop.ROUTER, Hop.FRESH):
        return None
    url, target, proxy = _url(plan, loc.hop)
    sent = _body(body, True)
    start = time.monotonic()
    ex = await _send(url, sent, plan, proxy=proxy)
    return _cell(loc.hop, target, Payload.BISECT, True, sent.size, ex, start)


async def _bisect(plan: _Plan, loc: Located, cells: list[Cell]) -> Bisection | None:
    """Bisect the payload size through the located hop (streaming), at most a few steps, each
    started only while one more idle timeout fits before the deadline."""
    if not loc.size_dependent or loc.hop is None:
        return None
    ok_bytes, fail_bytes = plan.body(Payload.SMALL_PROMPT).size, plan.failing.size
    steps: list[Cell] = []
    while (size := bisect_next(ok_bytes, fail_bytes, len(steps))) is not None:
        if not plan.fits():
            break
        cell = await _bisect_cell(plan, loc, cells, plan.failing.shrunk(size))
        if cell is None:
            break
        steps.append(cell)
        ok_bytes, fail_bytes = (
            (cell.payload_bytes, fail_bytes) if cell.ok else (ok_bytes, cell.payload_bytes)
        )
    target = steps[0].target if steps else ""
    return Bisection(loc.hop, target, ok_bytes, fail_bytes, tuple(steps))


async def replay_matrix(
    targets: Targets,
    failure: Failure,
    failing: ChatBody,
    *,
    model: str,
    idle_s: float,
    deadline: float | None = None,
    headers: Headers = (),
    rate: DecodeRate | None = None,
) -> Matrix:
    """Every cell for ``failing`` (and the minimal payload, the load the failure met, the probes
    that vary one thing), located; bisected when the failure depends on the prompt's size (see
    the module docstring). Each request is bounded by ``idle_s``; a turn after the first two
    starts only while it fits before ``deadline`` (monotonic); a non-streamed one by its
    deadline from ``rate`` (the soak's own streams' decode rate; None: unknown)."""
    start = time.monotonic()
    until = start + Deadlines(idle_s).matrix_s if deadline is None else deadline
    plan = _Plan(targets, failing, e2e_probe_body(model=model), idle_s, until, headers, rate)
    cells = list(await asyncio.gather(*_turn(plan, Payload.FAILING, True)))
    for payload, stream in _TURNS:
        if plan.fits():
            cells += await asyncio.gather(*_turn(plan, payload, stream))
    if failure.connection_requests > 0 and plan.fits():
        cells.append(await _reused_cell(plan, failure.connection_requests, failure.idle_s))
    loc = locate(cells)
    if loc.layer is None and failure.in_flight > 1:
        cells += await _under_load(plan, failure.in_flight)
        loc = locate(cells)
    cells += await _probe_cells(plan, loc, cells)
    loc = locate(cells)
    depends = dependence(cells, loc)
    load = failure.in_flight if depends == Dependence.LOAD and loc.load is None else loc.load
    loc = replace(loc, dependence=depends, load=load)
    bisection = await _bisect(plan, loc, cells)
    return Matrix(tuple(cells), loc, bisection, time.monotonic() - start)


async def holds(targets: Targets, body: ChatBody, *, idle_s: float, headers: Headers = ()) -> bool:
    """``body`` streamed straight to the router, then through the entry point (one after the
    other, so neither shares an engine batch with the other): whether the entry holds the stream
    the router streams (:func:`~servelab.core.soak.replay.held`)."""
    plan = _Plan(targets, body, e2e_probe_body(model="m"), idle_s, time.monotonic(), headers)
    router = await _entry_cell(plan, Hop.ROUTER, Payload.FAILING, True)
    entry = await _entry_cell(plan, Hop.FRESH, Payload.FAILING, True)
    return held(entry, router)
