"""Token events written to their connections from the decode step loop.

A streaming response registers a :class:`TokenWriter` as its sequence's sink; the scheduler calls
it right after each step (``Sequence.sink``), and it writes the step's new token events to the
connection's transport at once, as one HTTP/1.1 chunk: no coroutine wakes per token, so a step
over a batch of B sequences costs B small writes inside one loop callback. A plain-text output's
events are rendered :data:`_BLOCK` at a time, each already framed as its chunk, so a token costs
a list index and a write.
The handler sleeps until its sequence is done (or its client went away) and only writes the
response's first and last events itself, through aiohttp: the first write carries the head, the
stream's start and the tokens emitted so far (:meth:`TokenWriter.take`), the last one the finish,
the usage and ``[DONE]``; a send per token and item in between.

aiohttp buffers a response's head until the first body write, so :meth:`TokenWriter.start` sends
it before any token goes to the transport directly, and frames each write as a chunk when the
response is chunked (HTTP/1.1; HTTP/1.0 ends the body by closing the connection).
"""

from __future__ import annotations

import asyncio

from aiohttp import HttpVersion11, web

from servelab.sim.protocol import GenItem, GenRequest
from servelab.sim.scheduler import Sequence
from servelab.sim.tokenevent import stream_token, token_frame
from servelab.sim.tracing import mark

__all__ = ["TokenWriter"]


#: Token events rendered ahead at a time (each a ready HTTP/1.1 chunk): a long answer is
#: rendered block by block, never all at once inside one step.
_BLOCK = 64


class TokenWriter:
    """Writes ``seq``'s token events of one item to the request's connection as they come."""

    def __init__(
        self, request: web.Request, req: GenRequest, item: GenItem, seq: Sequence, rid: str,
        created: int,
    ) -> None:  # fmt: skip
        self._transport = request.transport
        self._chunked = request.version >= HttpVersion11
        self._req, self._item, self._seq = req, item, seq
        self._rid, self._created = rid, created
        self._frame = token_frame(req, item, seq.out, rid, created)
        #: ready chunks of tokens ``_base`` .. ``_base + len(_chunks)`` of ``_out``
        self._out = seq.out
        self._chunks: list[bytes] = []
        self._base = 0
        self.sent = 0
        self.gone = False

    def start(self, request: web.Request) -> None:
        """Send the response head aiohttp still holds, write the tokens emitted so far, and
        take the sequence's later tokens from the step loop."""
        writer = request.writer
        send_headers = getattr(writer, "send_headers", None)
        if send_headers is not None:
            send_headers()
        self()
        self._seq.sink = self

    def stop(self) -> None:
        """Stop taking tokens (the sequence ended, or the handler is leaving)."""
        self._seq.sink = None

    def __call__(self) -> None:
        """Write the tokens emitted since the last call (the step loop calls this)."""
        seq = self._seq
        n, sent = seq.n_out, self.sent
        if n <= sent or self.gone:
            return
        transport = self._transport
        if transport is None or transport.is_closing():
            self.gone = True  # the handler aborts the request when it wakes
            seq.cancelled = True
            seq.done.set()
            return
        k = sent - self._base
        if n == sent + 1 and seq.out is self._out and 0 <= k < len(self._chunks):
            data = self._chunks[k]  # the common case: one token a step, rendered ahead
        else:
            data = self._render(seq, sent, n)
        if not sent:  # stamped before the write: the client may read it at once
            mark(self._req.marks, "first_token")
        transport.write(data)
        self.sent = n

    def take(self) -> bytes:
        """The events of the tokens emitted so far and not written yet (not framed), counted as
        written: the handler sends them in the write that carries the stream's start (and the
        response's head), one ``send`` fewer per item."""
        seq = self._seq
        n, sent = seq.n_out, self.sent
        if n <= sent:
            return b""
        if not sent:
            mark(self._req.marks, "first_token")
        self.sent = n
        return self._events(seq, sent, n)

    def _render(self, seq: Sequence, sent: int, n: int) -> bytes:
        """The bytes of tokens ``sent`` .. ``n``; renders the next block ahead when the output
        is plain text and its tokens come one a step."""
        frame, out = self._frame, seq.out
        if frame is not None and n == sent + 1 and out is self._out:
            self._base = sent
            self._chunks = frame.chunks(out.pieces[sent : sent + _BLOCK], self._chunked)
            return self._chunks[0]
        body = self._events(seq, sent, n)
        return b"%x\r\n%b\r\n" % (len(body), body) if self._chunked else body

    def _events(self, seq: Sequence, sent: int, n: int) -> bytes:
        """The events of tokens ``sent`` .. ``n``, not framed."""
        frame, out = self._frame, seq.out
        if frame is not None:
            return b"".join(frame.event(p) for p in out.pieces[sent:n])
        req, item, rid, created = self._req, self._item, self._rid, self._created
        return b"".join(stream_token(req, item, out, k, rid, created) for k in range(sent, n))

    async def wait(self, request: web.Request, stalled: bool) -> None:
        """Until the sequence is done; raise ``ConnectionResetError`` if the client went away
        (noticed at the next token, or, for a stalled sequence, by polling its connection)."""
        seq = self._seq
        if stalled:
            while (transport := request.transport) is not None and not transport.is_closing():
                await asyncio.sleep(0.25)
            self.gone = True
        else:
            await seq.done.wait()
        if self.gone:
            raise ConnectionResetError("client went away")
