"""How one soak request goes: the exchange, and its decoding.

Every request of the soak and of its localization goes through :class:`~servelab.io.http.client.
StreamClient` (the one HTTP seam): :func:`exchange` posts one chat request and decodes the
answer's stamped reads (streamed: the SSE decoder, the record and the answer assembler; not
streamed: the JSON body), every failure into the record.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from itertools import pairwise
from time import perf_counter_ns
from typing import Protocol

from servelab.core.load.identity import request_identity
from servelab.core.load.records import REASON_MALFORMED, RequestRecord, StreamAccumulator
from servelab.core.load.sse import SSEDecoder
from servelab.core.soak.agentic import Answer, AnswerAssembler
from servelab.core.soak.body import ChatBody
from servelab.core.soak.deadlines import Deadlines
from servelab.core.soak.signatures import Outcome, Phase, outcome_of, phase_of
from servelab.io.http.stream import StreamClient
from servelab.io.http.transfer import Resend, Transfer

__all__ = ["CHAT", "Exchange", "Headers", "Sender", "client", "exchange", "one_shot"]

CHAT = "/v1/chat/completions"

#: Request headers a soak sends on every request, ``((name, value), ...)``.
Headers = tuple[tuple[str, str], ...]


@dataclass
class Exchange:
    """One request: its record, the answer, what was received; how it ended and where (the
    stall rule, :func:`servelab.core.soak.signatures.stall`, decides a stall)."""

    record: RequestRecord
    received_bytes: int = 0
    received_events: int = 0
    answer: Answer = field(default_factory=lambda: Answer(""))
    #: the answer's head (names lower-cased), and the resends the client made for it
    headers: dict[str, str] = field(default_factory=dict)
    resends: list[Resend] = field(default_factory=list)

    @property
    def phase(self) -> Phase:
        return phase_of(self.record)

    @property
    def outcome(self) -> Outcome:
        return outcome_of(self.record)

    @property
    def stalled(self) -> bool:
        return self.outcome == Outcome.STALLED

    @property
    def detail(self) -> str:
        rec = self.record
        return "" if rec.ok else f"{rec.error}: {rec.error_detail}"[:200]

    @property
    def server(self) -> str:
        """The answer's ``Server`` header ("" when none)."""
        return self.headers.get("server", "")

    @property
    def echoed_id(self) -> bool | None:
        """The answer carried the request's own ``x-request-id`` back (None: no head came)."""
        if self.record.first_byte_ns is None:
            return None
        return self.headers.get("x-request-id") == self.record.request_id

    @property
    def first_event_s(self) -> float | None:
        """Seconds from the send to the first streamed event (None: none came)."""
        rec = self.record
        return (rec.event_ns[0] - rec.sent_ns) / 1e9 if rec.event_ns and rec.sent_ns else None

    @property
    def max_gap_s(self) -> float | None:
        """The longest wait between two streamed events (None: fewer than two came)."""
        stamps = self.record.event_ns
        if len(stamps) < 2:
            return None
        return max(b - a for a, b in pairwise(stamps)) / 1e9


def _decoded(got: Transfer, max_tokens: int | None = None) -> Exchange:
    """The answer's stamped reads through the SSE decoder, the record and the answer assembler,
    exactly as if decoded on arrival: the stream's own failures (malformed, server error) come
    before a transport failure that cut it, and only a stream that ended is finished; usage
    above the request's ``max_tokens`` is not believed."""
    record = got.record
    ex = Exchange(record, got.received_bytes, headers=got.headers, resends=got.resends)
    if record.status is None or record.status >= 300:
        return ex
    cut = None if record.error is None else (record.error, record.error_detail)
    record.error, record.error_detail = None, ""
    decoder, acc, asm = SSEDecoder(), StreamAccumulator(record, max_tokens), AnswerAssembler()
    for t_ns, data in got.chunks:
        events = decoder.feed(data, t_ns)
        ex.received_events += len(events)
        acc.on_events(events)
        asm.on_events(events)
    if cut is not None:
        record.fail(*cut)
        return ex
    end_ns = record.end_ns or perf_counter_ns()
    tail = decoder.flush(end_ns)
    asm.on_events([e for e in tail if e.complete])
    acc.finish(end_ns, tail)
    ex.answer = asm.answer()
    return ex


def _plain(got: Transfer) -> Exchange:
    """A non-streamed answer: one JSON document with ``choices`` (else a malformed answer)."""
    record = got.record
    ex = Exchange(record, got.received_bytes, headers=got.headers, resends=got.resends)
    if record.error is not None:
        return ex
    raw = b"".join(data for _, data in got.chunks)
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    choices = doc.get("choices") if isinstance(doc, dict) else None
    if not isinstance(choices, list) or not choices:
        record.fail(REASON_MALFORMED, raw[:200].decode("utf-8", "replace"))
        return ex
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    text = message.get("content") if isinstance(message, dict) else None
    ex.answer = Answer(text if isinstance(text, str) else "")
    return ex


class Sender(Protocol):
    """What sends one request and returns what came back, undecoded: the raw stream client
    (:class:`~servelab.io.http.stream.StreamClient`) or the OpenAI SDK's
    (:class:`~servelab.io.http.sdk.SdkClient`)."""

    async def transfer(self, path: str, body: bytes, record: RequestRecord) -> Transfer: ...


async def exchange(client: Sender, body: bytes, index: int, *, stream: bool = True) -> Exchange:
    """POST one chat request; every failure goes into the record, nothing raises except
    cancellation (and the caller's deadline, as TimeoutError)."""
    record = RequestRecord(index=index, scheduled_ns=perf_counter_ns())
    record.request_id, record.traceparent = request_identity(secrets.token_hex(8), index)
    got = await client.transfer(CHAT, body, record)
    return _decoded(got, _max_tokens(body)) if stream else _plain(got)


def _max_tokens(body: bytes) -> int | None:
    """The ``max_tokens`` a request body asks (servelab wrote it), None when it asks none."""
    try:
        value = json.loads(body).get("max_tokens")
    except (ValueError, AttributeError):
        return None
    return value if type(value) is int else None


def client(
    url: str, idle_s: float, *, fresh: bool, headers: Headers = (), resend: bool = True,
    proxy: str | None = None,
) -> StreamClient:  # fmt: skip
    """One session's client: one keep-alive connection (``fresh``: a new one per request), the
    soak's request ``headers`` on every request; ``resend`` False: a plain client that never
    sends a request again (:class:`~servelab.io.http.stream.StreamClient`); ``proxy``: through
    that forward proxy."""
    connect_s = Deadlines(idle_s).connect_s
    return StreamClient(
        url,
        concurrency=1,
        idle_timeout_s=idle_s,
        connect_timeout_s=connect_s,
        headers=dict(headers),
        force_close=fresh,
        trace_connections=True,
        resend=resend,
        proxy=proxy,
    )


async def one_shot(
    url: str, body: ChatBody, idle_s: float, headers: Headers = (), proxy: str | None = None
) -> Exchange:
    """One request on a brand-new connection (closed afterwards, through ``proxy`` if given);
    streamed as ``body`` says."""
    async with client(url, idle_s, fresh=True, headers=headers, proxy=proxy) as c:
        return await exchange(c, body.encoded(), -1, stream=body.stream)
