"""Per-request records with nanosecond timestamps, and the sans-I/O reader that fills them.

All times are ``perf_counter_ns()`` values of one process; metrics subtract them, never mix clocks.
:class:`StreamAccumulator` interprets decoded SSE events of an OpenAI-compatible streaming response
(chat or completions): content per event, ``usage``, in-band errors, ``[DONE]``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from servelab.core.sse import Event, SSEDecoder

__all__ = [
    "REASON_CONNECTION",
    "REASON_DEADLINE",
    "REASON_IDLE",
    "REASON_INTERRUPTED",
    "REASON_MALFORMED",
    "REASON_SERVER_ERROR",
    "REASON_TRUNCATED",
    "RequestRecord",
    "StreamAccumulator",
    "decode_chunks",
    "http_reason",
    "record_from_dict",
    "record_to_dict",
]

REASON_MALFORMED = "malformed stream"
REASON_TRUNCATED = "truncated stream"
REASON_IDLE = "idle timeout"
REASON_DEADLINE = "run deadline"
REASON_CONNECTION = "connection error"
REASON_SERVER_ERROR = "error in stream"
REASON_INTERRUPTED = "interrupted"
_DETAIL_MAX = 300


def http_reason(status: int) -> str:
    """The failure reason of a non-2xx response: ``"http 500"``."""
    return f"http {status}"


@dataclass(slots=True)
class RequestRecord:
    """What happened to one request. ``event_ns[i]`` carries ``event_tokens[i]`` content tokens."""

    index: int
    scheduled_ns: int
    input_tokens: int = 0
    sent_ns: int = 0
    first_byte_ns: int | None = None
    end_ns: int | None = None
    status: int | None = None
    error: str | None = None
    error_detail: str = ""
    output_tokens: int = 0
    tokens_from_usage: bool = False
    warmup: bool = False
    event_ns: list[int] = field(default_factory=list)
    event_tokens: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the request finished without any error."""
        return self.error is None and self.end_ns is not None

    def fail(self, reason: str, detail: str = "") -> None:
        """Mark the request failed; the first reason wins."""
        if self.error is None:
            self.error = reason
            self.error_detail = detail[:_DETAIL_MAX]


def record_to_dict(record: RequestRecord) -> dict[str, Any]:
    """A JSON-ready dict of ``record`` (all fields, lists included)."""
    return asdict(record)


def record_from_dict(data: dict[str, Any]) -> RequestRecord:
    """The inverse of :func:`record_to_dict`."""
    return RequestRecord(**data)


def _content_of(choice: dict[str, Any]) -> str:
    delta = choice.get("delta")
    if isinstance(delta, dict):
        text = delta.get("content") or delta.get("reasoning_content") or ""
        return text if isinstance(text, str) else ""
    text = choice.get("text") or ""
    return text if isinstance(text, str) else ""


class StreamAccumulator:
    """Feeds decoded events into a :class:`RequestRecord` (sans-I/O; the client owns the socket)."""

    __slots__ = ("_broken", "_done", "_usage_seen", "record")

    def __init__(self, record: RequestRecord) -> None:
        self.record = record
        self._done = False
        self._broken = False
        self._usage_seen = 0

    @property
    def done(self) -> bool:
        """True once ``data: [DONE]`` was seen."""
        return self._done

    def on_events(self, events: list[Event]) -> None:
        """Interpret each event of one read."""
        for event in events:
            self.on_event(event)

    def on_event(self, event: Event) -> None:
        """Interpret one event: count its content tokens, pick up usage, spot errors."""
        data = event.data
        if data == "[DONE]":
            self._done = True
            return
        if self._broken:
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            chunk = None
        if not isinstance(chunk, dict):
            self._break(REASON_MALFORMED, data)
        elif "error" in chunk or chunk.get("object") == "error":
            self._break(REASON_SERVER_ERROR, data)
        else:
            self._on_chunk(chunk, event.t_ns)

    def _break(self, reason: str, detail: str) -> None:
        self._broken = True
        self.record.fail(reason, detail)

    def _on_chunk(self, chunk: dict[str, Any], t_ns: int) -> None:
        choices = chunk.get("choices") or []
        tokens = sum(1 for c in choices if isinstance(c, dict) and _content_of(c))
        usage = chunk.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            completion = usage["completion_tokens"]
            if tokens and completion > self._usage_seen:
                tokens = completion - self._usage_seen
            self._usage_seen = completion
            self.record.output_tokens = completion
            self.record.tokens_from_usage = True
            if isinstance(usage.get("prompt_tokens"), int):
                self.record.input_tokens = usage["prompt_tokens"]
        if tokens or choices:
            self.record.event_ns.append(t_ns)
            self.record.event_tokens.append(tokens)

    def finish(self, t_ns: int, tail: list[Event]) -> RequestRecord:
        """End of body at ``t_ns``; ``tail`` is the decoder's ``flush()``. Returns the record."""
        record = self.record
        for event in tail:
            if event.complete:
                self.on_event(event)
            else:
                record.fail(REASON_MALFORMED, event.data)
        record.end_ns = t_ns
        if not self._done:
            record.fail(REASON_TRUNCATED, "stream ended without data: [DONE]")
        if not record.tokens_from_usage:
            record.output_tokens = sum(record.event_tokens)
        return record


def decode_chunks(
    record: RequestRecord, chunks: Iterable[tuple[int, bytes]], end_ns: int
) -> RequestRecord:
    """Decode a body captured as ``(perf_counter_ns at read, bytes)`` pairs into ``record``.

    Each event keeps the stamp of the read that completed it, exactly as if it had been decoded
    on arrival; ``end_ns`` is when the body ended.
    """
    decoder = SSEDecoder()
    acc = StreamAccumulator(record)
    for t_ns, data in chunks:
        acc.on_events(decoder.feed(data, t_ns))
    return acc.finish(end_ns, decoder.flush(end_ns))
