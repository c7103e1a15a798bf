"""Answering a generation request, as both simulated engines do (the SGLang app,
:mod:`servelab.sim.app`, and the vLLM one, :mod:`servelab.sim.vllm`): the work a handler awaits
while its client is still there (:func:`unless_gone`), the sequences answered streamed or whole
(:func:`respond`: a stream's token events are written by the step loop), what a handler returns
once its client went away (:func:`client_gone`), the prompt tokens the prefix cache held
(:func:`cached_usage`) and what a request's spans carry (:func:`request_facts`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable
from typing import TypeVar

from aiohttp import web

from servelab.sim.limits import CachedTokens
from servelab.sim.protocol import (
    GenRequest,
    done_event,
    final_body,
    stream_finish,
    stream_start,
    stream_usage,
)
from servelab.sim.scheduler import Sequence
from servelab.sim.tokenstream import TokenWriter
from servelab.sim.tracing import RequestFacts, mark
from servelab.sim.worker import Worker

__all__ = ["cached_usage", "client_gone", "request_facts", "respond", "unless_gone"]

T = TypeVar("T")
#: Seconds between two looks at a waiting request's connection.
_GONE_POLL_S = 0.5


def _gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


async def unless_gone(request: web.Request, work: Awaitable[T]) -> T:
    """``work`` (a prefill, a wait for KV), cancelled when the request's client goes away first,
    as an engine aborts a request whose connection closed; then :class:`ConnectionResetError`."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=_GONE_POLL_S)
            if done:
                return task.result()
            if _gone(request):
                raise ConnectionResetError("client went away")
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _wait_done(request: web.Request, seqs: list[Sequence]) -> bool:
    """Wait for every sequence; False if the client went away first."""
    for seq in seqs:
        while not seq.done.is_set():
            try:
                await asyncio.wait_for(seq.done.wait(), 0.5)
            except TimeoutError:
                transport = request.transport
                if transport is None or transport.is_closing():
                    return False
    return True


async def _stream(
    request: web.Request, worker: Worker, req: GenRequest, seqs: list[Sequence], rid: str,
    created: int,
) -> web.StreamResponse:  # fmt: skip
    """Stream the items one after the other; each item's token events are written by the step
    loop (:class:`~servelab.sim.tokenstream.TokenWriter`), this handler writes the rest."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    resp.headers["Cache-Control"] = "no-cache"
    await resp.prepare(request)
    finish = b""
    for item, seq in zip(req.items, seqs, strict=True):
        await resp.write(finish + stream_start(req, item, rid, created))
        writer = TokenWriter(request, req, item, seq, rid, created)
        writer.start(request)
        try:
            await writer.wait(request, worker.is_stalled(seq))
        finally:
            writer.stop()
        finish = stream_finish(req, item, seq.out, writer.sent, rid, created)
    n_outs = [s.n_out for s in seqs]
    cached, report = cached_usage(worker, seqs)
    usage = stream_usage(req, n_outs, rid, created, cached=cached, report=report)
    mark(req.marks, "done")
    await resp.write_eof(finish + usage + done_event())  # the stream's end in one write
    return resp


async def respond(
    request: web.Request, worker: Worker, req: GenRequest, seqs: list[Sequence],
    rid: str | None = None,
) -> web.StreamResponse:  # fmt: skip
    """Answer the sequences (streamed or whole); ``rid``: the response's id (SGLang's request
    id), a fresh one by default."""
    rid = rid or uuid.uuid4().hex
    created = int(time.time())
    try:
        if req.stream:
            resp = await _stream(request, worker, req, seqs, rid, created)
        else:
            if not await _wait_done(request, seqs):
                raise ConnectionResetError("client went away")
            outs, n_outs = [s.out for s in seqs], [s.n_out for s in seqs]
            cached, report = cached_usage(worker, seqs)
            body = final_body(req, outs, n_outs, rid, created, cached=cached, report=report)
            mark(req.marks, "done")
            resp = web.json_response(body)
    except (ConnectionError, asyncio.CancelledError) as exc:
        for seq in seqs:
            seq.cancelled = True
        worker.release(seqs)
        if worker.settings.role == "decode":
            worker.record_abort()
        if not isinstance(exc, ConnectionError):
            raise
        return client_gone()
    worker.finished()
    return resp


def client_gone() -> web.Response:
    """What a handler returns when its client went away: aiohttp fails to write it on the
    closed connection and moves on quietly (a raised error would be logged with its traceback,
    about 2.5 ms of CPU for every client that leaves mid-answer)."""
    return web.Response(status=499, text="client closed the request")


def cached_usage(worker: Worker, seqs: list[Sequence]) -> tuple[int, CachedTokens]:
    """The prompt tokens the prefix cache held, and how the engine's arguments say to report
    them (``final_body``/``stream_usage``)."""
    return sum(s.cached_tokens for s in seqs), worker.settings.limits.cached_tokens


def request_facts(worker: Worker, req: GenRequest, rid: str) -> RequestFacts:
    """What the request's spans carry besides its marks (its first item's room and sizes)."""
    item = req.items[0] if req.items else None
    return RequestFacts(
        rid=rid,
        room=None if item is None else item.room,
        prompt_tokens=0 if item is None else item.prompt_tokens,
        max_tokens=0 if item is None else item.max_tokens,
        model=worker.settings.served_model_name,
    )
