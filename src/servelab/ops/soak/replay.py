"""The differential replay matrix, sent: every cell of :mod:`servelab.core.soak.replay` over HTTP.

For one failure: the failing payload and a minimal one, streaming and not, straight to each
prefill/decode pair (the PD request the router sends: SGLang's, the same body to both at once,
with ``bootstrap_host``/``bootstrap_port``/``bootstrap_room``; vLLM's, the NIXL prefill leg with
``kv_transfer_params`` and then the decode leg with the params it answered), straight to the
router, through the entry point on a fresh connection and (when the failure was on a reused
connection) on a reused one carrying as many requests first. Every request is bounded by the idle
timeout; the cells run concurrently (``asyncio.gather``). Then, when the failure depends on the
payload's size, the size is bisected through the hop that fails. All requests go through
:class:`~servelab.io.http.client.StreamClient`.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable
from time import perf_counter_ns
from typing import Any
from urllib.parse import urlsplit

from servelab.core.deploy.engines import EngineName
from servelab.core.load.records import REASON_MALFORMED, RequestRecord
from servelab.core.soak.agentic import e2e_probe_body, payload_size
from servelab.core.soak.replay import (
    Bisection,
    Cell,
    Hop,
    Located,
    Matrix,
    Payload,
    bisect_next,
    locate,
    shrink,
)
from servelab.core.soak.result import Targets, WorkerTarget
from servelab.core.soak.signatures import Failure
from servelab.ops.soak.client import CHAT, Exchange, client, exchange

__all__ = ["pairs_of", "replay_matrix"]

_ROOM_BITS = 63
#: What vllm-router puts in a prefill leg (vllm-router 0.1.17, ``vllm_pd_router.rs``).
_REMOTE_DECODE = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                  "remote_block_ids": None, "remote_host": None, "remote_port": None}  # fmt: skip


def pairs_of(targets: Targets) -> list[tuple[WorkerTarget, WorkerTarget]]:
    """Every (prefill, decode) pair that can be replayed directly (prefill bootstrap port known)."""
    prefills = [w for w in targets.workers if w.role == "prefill" and w.bootstrap_port]
    decodes = [w for w in targets.workers if w.role == "decode"]
    return [(p, d) for p in prefills for d in decodes]


def _body(body: dict[str, Any], stream: bool) -> dict[str, Any]:
    out = dict(body)
    out["stream"] = stream
    if not stream:
        out.pop("stream_options", None)
    return out


def _cell(
    hop: Hop, target: str, payload: Payload, stream: bool, size: int, ex: Exchange, start: float
) -> Cell:
    rec = ex.record
    head = None if rec.first_byte_ns is None else (rec.first_byte_ns - rec.sent_ns) / 1e9
    return Cell(
        hop,
        target,
        payload,
        stream,
        size,
        ex.outcome,
        rec.status,
        time.monotonic() - start,
        head,
        ex.received_bytes,
        ex.detail,
    )


async def _send(url: str, body: dict[str, Any], idle_s: float) -> Exchange:
    async with client(url, idle_s, fresh=True) as c:
        return await exchange(c, json.dumps(body).encode(), -1, stream=bool(body["stream"]))


async def _entry_cell(
    hop: Hop, url: str, target: str, payload: tuple[Payload, dict[str, Any]], stream: bool,
    idle: float,
) -> Cell:  # fmt: skip
    kind, body = payload
    sent = _body(body, stream)
    start = time.monotonic()
    ex = await _send(url, sent, idle)
    return _cell(hop, target, kind, stream, payload_size(sent), ex, start)


async def _reused_cell(
    url: str, failing: dict[str, Any], minimal: dict[str, Any], carried: int, idle: float
) -> Cell:
    """``carried`` minimal requests on one keep-alive connection, then the failing payload."""
    sent = _body(failing, True)
    async with client(url, idle, fresh=False) as c:
        for i in range(carried):
            await exchange(c, json.dumps(_body(minimal, False)).encode(), i, stream=False)
        start = time.monotonic()
        ex = await exchange(c, json.dumps(sent).encode(), carried)
    return _cell(Hop.REUSED, "entry", Payload.FAILING, True, payload_size(sent), ex, start)


async def _prefill_leg(url: str, body: dict[str, Any], idle_s: float) -> tuple[Exchange, Any]:
    """A vLLM prefill leg: the exchange and the ``kv_transfer_params`` its answer carries (None:
    it failed, or answered without them)."""
    record = RequestRecord(index=-1, scheduled_ns=perf_counter_ns())
    async with client(url, idle_s, fresh=True) as c:
        got = await c.transfer(CHAT, json.dumps(body).encode(), record)
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
    prefill: WorkerTarget, decode: WorkerTarget, body: dict[str, Any], idle: float
) -> tuple[Exchange, Exchange | None]:
    """vllm-router's hand-off, sent by hand: the prefill leg (one token, not streamed, asking for
    a remote decode), then the decode leg: the client's body with the params the prefill
    answered, which the decode pulls the KV with (no decode leg when the prefill failed)."""
    leg = {**body, "max_tokens": 1, "min_tokens": 1, "stream": False,
           "kv_transfer_params": _REMOTE_DECODE}  # fmt: skip
    leg.pop("stream_options", None)
    if "max_completion_tokens" in leg:
        leg["max_completion_tokens"] = 1
    pre, params = await _prefill_leg(prefill.url, leg, idle)
    if params is None:
        return pre, None
    return pre, await _send(decode.url, {**body, "kv_transfer_params": params}, idle)


async def _pair_cell(
    pair: tuple[WorkerTarget, WorkerTarget],
    payload: tuple[Payload, dict[str, Any]],
    stream: bool,
    idle: float,
    engine: EngineName = "sglang",
) -> Cell:
    """The router's PD request, sent by hand: SGLang's, the same body to prefill and decode at
    once; vLLM's, its two legs (:func:`_nixl_legs`)."""
    prefill, decode = pair
    kind, body = payload
    start = time.monotonic()
    if engine == "vllm":
        sent = _body(body, stream)
        pre, dec = await _nixl_legs(prefill, decode, sent, idle)
    else:
        sent = _body(body, stream) | {
            "bootstrap_host": urlsplit(prefill.url).hostname,
            "bootstrap_port": prefill.bootstrap_port,
            "bootstrap_room": random.getrandbits(_ROOM_BITS),
        }
        pre, dec = await asyncio.gather(
            _send(prefill.url, sent, idle), _send(decode.url, sent, idle)
        )
    failed, side = (dec, "decode") if pre.record.ok and dec is not None else (pre, "prefill")
    cell = _cell(Hop.PAIR, f"{prefill.service}+{decode.service}", kind, stream, 0, failed, start)
    ok = pre.record.ok and dec is not None and dec.record.ok
    return Cell(
        cell.hop, cell.target, kind, stream, payload_size(sent), cell.outcome, cell.status,
        cell.elapsed_s, cell.first_byte_s, cell.received_bytes, cell.detail,
        "" if ok else side, prefill.service, decode.service,
    )  # fmt: skip


def _jobs(
    targets: Targets,
    failure: Failure,
    failing: dict[str, Any],
    minimal: dict[str, Any],
    idle: float,
) -> list[Awaitable[Cell]]:
    payloads = ((Payload.FAILING, failing), (Payload.MINIMAL, minimal))
    jobs: list[Awaitable[Cell]] = []
    for payload in payloads:
        for stream in (True, False):
            jobs += [
                _pair_cell(pair, payload, stream, idle, targets.engine)
                for pair in pairs_of(targets)
            ]
            if targets.router_url and targets.via_proxy:
                name = targets.router_service
                jobs.append(
                    _entry_cell(Hop.ROUTER, targets.router_url, name, payload, stream, idle)
                )
            hop = Hop.FRESH if targets.via_proxy else Hop.ROUTER
            target = "entry" if targets.via_proxy else targets.router_service
            jobs.append(_entry_cell(hop, targets.entry_url, target, payload, stream, idle))
    if failure.connection_requests > 0:
        carried = failure.connection_requests
        jobs.append(_reused_cell(targets.entry_url, failing, minimal, carried, idle))
    return jobs


def _hop_url(targets: Targets, loc: Located) -> tuple[Hop, str, str] | None:
    """The located hop, its URL and target, when it is reached through a URL (the router, or
    the entry point on a fresh connection)."""
    if loc.hop == Hop.ROUTER and targets.router_url:
        url = targets.router_url if targets.via_proxy else targets.entry_url
        return Hop.ROUTER, url, targets.router_service
    if loc.hop == Hop.FRESH:
        return Hop.FRESH, targets.entry_url, "entry"
    return None


async def _bisect_cell(
    targets: Targets, loc: Located, cells: list[Cell], body: dict[str, Any], idle: float
) -> Cell | None:
    if loc.hop == Hop.PAIR:
        pair = next(
            (p for p in pairs_of(targets) if f"{p[0].service}+{p[1].service}" in
             {c.target for c in cells if not c.ok}),
            None,
        )  # fmt: skip
        if pair is None:
            return None
        return await _pair_cell(pair, (Payload.BISECT, body), True, idle, targets.engine)
    where = _hop_url(targets, loc)
    if where is None:
        return None
    hop, url, target = where
    return await _entry_cell(hop, url, target, (Payload.BISECT, body), True, idle)


async def _bisect(
    targets: Targets,
    loc: Located,
    cells: list[Cell],
    failing: dict[str, Any],
    bounds: tuple[float, float],
) -> Bisection | None:
    """Bisect the payload size through the located hop (streaming), at most a few steps, each
    started only while one more idle timeout fits before ``deadline``."""
    idle, deadline = bounds
    if not loc.size_dependent or loc.hop is None:
        return None
    ok_bytes, fail_bytes = payload_size(e2e_probe_body(model="m")), payload_size(failing)
    steps: list[Cell] = []
    while (size := bisect_next(ok_bytes, fail_bytes, len(steps))) is not None:
        if time.monotonic() + idle > deadline:
            break
        cell = await _bisect_cell(targets, loc, cells, shrink(failing, size), idle)
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
    failing: dict[str, Any],
    *,
    model: str,
    idle_s: float,
    deadline: float | None = None,
) -> Matrix:
    """Every cell for ``failing`` (and the minimal payload), located; bisected when the failure
    depends on size (while time is left before ``deadline``, monotonic). Each request is bounded
    by ``idle_s``; the cells run concurrently."""
    start = time.monotonic()
    minimal = e2e_probe_body(model=model)
    cells = list(await asyncio.gather(*_jobs(targets, failure, failing, minimal, idle_s)))
    loc = locate(cells)
    until = start + 5 * idle_s if deadline is None else deadline
    bisection = await _bisect(targets, loc, cells, failing, (idle_s, until))
    return Matrix(tuple(cells), loc, bisection, time.monotonic() - start)
