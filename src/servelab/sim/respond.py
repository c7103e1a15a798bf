"""Answering a generation request, as both simulated engines do (the SGLang app,
:mod:`servelab.sim.app`, and the vLLM one, :mod:`servelab.sim.vllm`): the work a handler awaits
while its client is still there (:func:`unless_gone`), the sequences answered streamed or whole
(:func:`respond`: a stream's token events are written by the step loop), what a handler returns
once its client went away (:func:`client_gone`), the prompt tokens the prefix cache held
(:func:`cached_usage`) and what a request's spans carry (:func:`request_facts`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable
from typing import Any, TypeVar

from aiohttp import web

from servelab.sim.limits import CachedTokens
from servelab.sim.protocol import GenRequest, done_event, final_body
from servelab.sim.scheduler import Sequence
from servelab.sim.tokenevent import stream_finish, stream_start, stream_usage
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


class _Watch:
    """The requests of one event loop awaiting work while their client may leave: one timer
    looks at all their connections every :data:`_GONE_POLL_S` and cancels the handler of each
    whose connection closed (not a task, a waiter and a timer per request)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.tasks: dict[asyncio.Task[Any], web.Request] = {}
        self.fired: set[asyncio.Task[Any]] = set()
        self.timer: asyncio.TimerHandle | None = None

    def add(self, task: asyncio.Task[Any], request: web.Request) -> None:
        self.tasks[task] = request
        if self.timer is None:
            self.timer = self.loop.call_later(_GONE_POLL_S, self.sweep)

    def discard(self, task: asyncio.Task[Any]) -> bool:
        """Stop watching ``task``; whether it was cancelled because its client went away."""
        self.tasks.pop(task, None)
        if not self.tasks:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            _WATCHES.pop(self.loop, None)
        if task in self.fired:
            self.fired.discard(task)
            return True
        return False

    def sweep(self) -> None:
        self.timer = None
        for task, request in list(self.tasks.items()):
            if task not in self.fired and _gone(request):
                self.fired.add(task)
                task.cancel()  # raised inside the work it awaits (the only await while watched)
        if self.tasks:
            self.timer = self.loop.call_later(_GONE_POLL_S, self.sweep)


_WATCHES: dict[asyncio.AbstractEventLoop, _Watch] = {}


async def unless_gone(request: web.Request, work: Awaitable[T]) -> T:
    """``work`` (a prefill, a wait for KV), cancelled when the request's client goes away first,
    as an engine aborts a request whose connection closed; then :class:`ConnectionResetError`.
    Awaited in the handler's own task, looked after by its loop's :class:`_Watch`."""
    task = asyncio.current_task()
    assert task is not None
    loop = task.get_loop()
    watch = _WATCHES.get(loop)
    if watch is None:
        watch = _WATCHES[loop] = _Watch(loop)
    watch.add(task, request)
    try:
        return await work
    except asyncio.CancelledError:
        if not watch.discard(task):
            raise
        task.uncancel()
        raise ConnectionResetError("client went away") from None
    finally:
        if watch.discard(task):  # cancelled for its client, but the work finished anyway
            task.uncancel()


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
        writer = TokenWriter(request, req, item, seq, rid, created)
        # the head (first item), the start and the tokens emitted so far in one write
        await resp.write(finish + stream_start(req, item, rid, created) + writer.take())
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
