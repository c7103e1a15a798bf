"""Per-request records with nanosecond timestamps, and the sans-I/O reader that fills them.

All times are ``perf_counter_ns()`` values of one process; metrics subtract them, never mix clocks.
:class:`StreamAccumulator` interprets decoded SSE events of an OpenAI-compatible streaming response
(chat or completions): content per event, ``usage``, in-band errors, ``[DONE]``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

import orjson

from servelab.core.load.chat import ChatChoice, ChatChunk, ChatDelta, ChatUsage, chunk_of
from servelab.core.load.sse import Event, SSEDecoder
from servelab.core.redaction import redact

__all__ = [
    "REASON_ABORTED",
    "REASON_CONNECTION",
    "REASON_DEADLINE",
    "REASON_EMPTY",
    "REASON_IDLE",
    "REASON_INTERRUPTED",
    "REASON_MALFORMED",
    "REASON_SERVER_ERROR",
    "REASON_TRUNCATED",
    "FailReason",
    "RequestRecord",
    "StreamAccumulator",
    "decode_chunks",
    "http_reason",
]


class FailReason(StrEnum):
    """Why a request failed, as its record stores it (``error``; the values are what every
    ledger holds: never change one). An HTTP error is ``http <status>`` (:func:`http_reason`);
    the request's own words are its ``error_detail``; report/ words both."""

    MALFORMED = "malformed stream"
    TRUNCATED = "truncated stream"
    IDLE = "idle timeout"
    DEADLINE = "run deadline"
    CONNECTION = "connection error"
    SERVER_ERROR = "error in stream"
    INTERRUPTED = "interrupted"
    #: The stream ended well but carried no output token (no content, text, reasoning or
    #: tool-call fragment): an engine that answers nothing did not answer.
    EMPTY = "empty answer"
    #: A choice ended with ``finish_reason: "abort"`` (SGLang's and vLLM's aborted request).
    ABORTED = "aborted"


REASON_MALFORMED = FailReason.MALFORMED
REASON_TRUNCATED = FailReason.TRUNCATED
REASON_IDLE = FailReason.IDLE
REASON_DEADLINE = FailReason.DEADLINE
REASON_CONNECTION = FailReason.CONNECTION
REASON_SERVER_ERROR = FailReason.SERVER_ERROR
REASON_INTERRUPTED = FailReason.INTERRUPTED
REASON_EMPTY = FailReason.EMPTY
REASON_ABORTED = FailReason.ABORTED
_DETAIL_MAX = 300
#: What a malformed stream's detail says before the event's data (the first 300 characters of
#: the detail are kept, a token in them masked: :func:`_quoted_detail`): what was wrong with it.
_NOT_A_CHUNK = "an event whose data is not a JSON object: "
_CUT_EVENT = "the stream ended inside an event (no blank line after it): "
#: The end marker's data. ``data: [DONE]`` without the blank line after it, at the end of a
#: body that ended well, is the end marker all the same (not a malformed stream): sglang-router
#: (0.3.2; its PD ``create_streaming_response``) stops relaying the decode worker's answer at
#: the read that carries ``data: [DONE]``, so when that read ends right after the marker or its
#: first newline, the rest (``\n`` or ``\n\n``) never reaches the client. Every token came; the
#: OpenAI SDK reads such a stream as whole. Only an unterminated event whose data is exactly
#: ``[DONE]`` is taken so; any other is still malformed.
_DONE = "[DONE]"
#: The end of a failure's detail searched for secrets: its first _DETAIL_MAX characters and the
#: rest of the word there, up to this many more (a token there is searched whole).
_WORD_TAIL = re.compile(r"\S{0,64}")


def _quoted_detail(detail: str) -> str:
    """``detail`` as a record keeps it: what the one redaction policy finds in it masked (a
    token an engine's error message quotes), then cut to :data:`_DETAIL_MAX` characters. Only
    the kept part and the word it cuts are searched (a bound: this runs on the client's loop),
    so the cut never leaves a token's first characters in view."""
    tail = _WORD_TAIL.match(detail, min(len(detail), _DETAIL_MAX))
    end = _DETAIL_MAX if tail is None else tail.end()
    return redact(detail[:end])[:_DETAIL_MAX]


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
    #: The engine's ``usage`` counts were not believable (:func:`usage_count`: not a whole
    #: number, negative, beyond the bound, fewer completion tokens than content events): the
    #: counted content events stand instead, and report/ says "usage disagreed".
    usage_disagreed: bool = False
    warmup: bool = False
    event_ns: list[int] = field(default_factory=list)
    event_tokens: list[int] = field(default_factory=list)
    #: Sent as the request's ``x-request-id`` and W3C ``traceparent`` headers when not empty
    #: (:func:`servelab.core.load.identity.request_identity`): how server spans find this record.
    request_id: str = ""
    traceparent: str = ""
    #: The prompt tokens the engine served from its prefix cache, as its ``usage`` said
    #: (``prompt_tokens_details.cached_tokens``; a ``null`` details object is 0, SGLang's way of
    #: saying none with ``--enable-cache-report``); None: not reported.
    cached_tokens: int | None = None
    #: A replayed trace's conversation this request is a turn of (its ordinal in the trace's
    #: order of first appearance); None: not a turn of one.
    session: int | None = None

    @property
    def ok(self) -> bool:
        """True when the request finished without any error."""
        return self.error is None and self.end_ns is not None

    def fail(self, reason: str, detail: str = "") -> None:
        """Mark the request failed; the first reason wins. ``detail`` (often the engine's own
        words) is kept with a token in it masked (:func:`_quoted_detail`)."""
        if self.error is None:
            self.error = reason
            self.error_detail = _quoted_detail(detail)


def _cached_tokens(usage: ChatUsage) -> int | None:
    """The cached prompt tokens a ``usage`` object reports: ``prompt_tokens_details
    .cached_tokens``, 0 for a ``null`` details object (SGLang with ``--enable-cache-report``
    when none was cached), None when it says nothing (no details: the report is off)."""
    if "prompt_tokens_details" not in usage:
        return None
    details = usage["prompt_tokens_details"]
    if details is None:
        return 0
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return cached if type(cached) is int and cached >= 0 else None


#: The most completion tokens one content event is believed to carry (SGLang's and vLLM's
#: ``--stream-interval`` and speculative decoding put a few in one; 64 is past any of them):
#: a ``usage.completion_tokens`` above 64 x the content events seen is not believed, nor one
#: above the request's ``max_tokens`` when it is known (an engine stops there).
TOKENS_PER_EVENT_MAX = 64
#: The most prompt tokens a ``usage.prompt_tokens`` is believed at (10^7: past any context).
PROMPT_TOKENS_MAX = 10**7


def usage_count(value: object, bound: int) -> int | None:
    """``value`` as a usage count when it is believable: a whole number (not a bool, not a
    float) from 0 to ``bound``; None otherwise."""
    return value if type(value) is int and 0 <= value <= bound else None


def _content_of(choice: ChatChoice) -> str:
    """The text a choice's chunk carries: its content, reasoning, or a tool call's arguments (an
    agent's answer is often a tool call: its fragments are its tokens)."""
    delta = choice.get("delta")
    if isinstance(delta, dict):
        text = delta.get("content") or delta.get("reasoning_content") or _arguments(delta)
        return text if isinstance(text, str) else ""
    text = choice.get("text") or ""
    return text if isinstance(text, str) else ""


def _arguments(delta: ChatDelta) -> str:
    """The argument fragments of a delta's tool calls, joined ("" without any)."""
    calls = delta.get("tool_calls")
    if not isinstance(calls, list):
        return ""
    parts = []
    for call in calls:
        fn = call.get("function") if isinstance(call, dict) else None
        args = fn.get("arguments") if isinstance(fn, dict) else None
        if isinstance(args, str):
            parts.append(args)
    return "".join(parts)


class StreamAccumulator:
    """Feeds decoded events into a :class:`RequestRecord` (sans-I/O; the client owns the socket)."""

    __slots__ = ("_broken", "_done", "_limit", "_sent", "_shaped", "_tally", "_usage_seen",
                 "record")  # fmt: skip

    def __init__(self, record: RequestRecord, max_tokens: int | None = None) -> None:
        self.record = record
        #: the request's ``max_tokens`` (None: not known): usage above it is not believed
        self._limit = max_tokens
        self._done = False
        self._broken = False
        self._usage_seen = 0
        #: the content events among the first ``_tally[0]`` events: ``_tally[1]`` (kept up to
        #: date only when usage is read, so the one-token fast path costs nothing more)
        self._tally = [0, 0]
        #: the client's own prompt and cache counts, put back when usage is not believed
        self._sent = (record.input_tokens, record.cached_tokens)
        #: (event position, the tokens counted) of each event whose count usage set
        self._shaped: list[tuple[int, int]] = []

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
        elif not self._broken:
            self._on_parsed(_parse(data), data, event.t_ns)

    def on_data(self, data: bytes, t_ns: int) -> None:
        """Interpret one event given as its undecoded data bytes (:meth:`SSEDecoder.whole`):
        exactly what :meth:`on_event` does with ``data`` decoded (UTF-8, errors replaced)."""
        if data == b"[DONE]":
            self._done = True
        elif self._broken:
            return
        elif (token := _ONE_TOKEN.fullmatch(data)) is not None:  # one delta, nothing else
            self.record.event_ns.append(t_ns)
            self.record.event_tokens.append(1 if token.end(1) > token.start(1) else 0)
        else:
            try:
                parsed = orjson.loads(data)
            except orjson.JSONDecodeError:  # not strict JSON, or not UTF-8: the standard way
                parsed = _NOT_STRICT
            chunk = chunk_of(parsed) if type(parsed) is dict else None
            if (
                chunk is not None
                and "error" not in chunk
                and chunk.get("object") != "error"
                and not _inexact(chunk)
            ):
                self._on_chunk(chunk, t_ns)
            else:
                text = data.decode("utf-8", "replace")
                self._on_parsed(_parse(text), text, t_ns)

    def _on_parsed(self, parsed: object, data: str, t_ns: int) -> None:
        chunk = chunk_of(parsed)
        if chunk is None:
            self._break(REASON_MALFORMED, f"{_NOT_A_CHUNK}{data}")
        elif "error" in chunk or chunk.get("object") == "error":
            self._break(REASON_SERVER_ERROR, data)
        else:
            self._on_chunk(chunk, t_ns)

    def _break(self, reason: str, detail: str) -> None:
        self._broken = True
        self.record.fail(reason, detail)

    def _on_chunk(self, chunk: ChatChunk, t_ns: int) -> None:
        choices = chunk.get("choices") or []
        tokens = 0
        for c in choices:
            if isinstance(c, dict) and _content_of(c):
                tokens += 1
            if isinstance(c, dict) and c.get("finish_reason") == "abort":
                self.record.fail(REASON_ABORTED, 'a choice ended with finish_reason "abort"')
        usage = chunk.get("usage")
        if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
            tokens = self._on_usage(usage, tokens)
        if tokens or choices:
            self.record.event_ns.append(t_ns)
            self.record.event_tokens.append(tokens)

    def _on_usage(self, usage: ChatUsage, tokens: int) -> int:
        """Take a chunk's ``usage`` when believable (:func:`usage_count`); returns the chunk's
        tokens (usage's increase when the chunk carries content). After one unbelievable count
        usage is ignored: the record is flagged and keeps its counted events."""
        record = self.record
        if record.usage_disagreed:
            return tokens
        bound = TOKENS_PER_EVENT_MAX * max(1, self._content_events() + (tokens > 0))
        bound = bound if self._limit is None else min(bound, self._limit)
        completion = usage_count(usage["completion_tokens"], bound)
        prompt = usage.get("prompt_tokens")
        if completion is None or (
            prompt is not None and usage_count(prompt, PROMPT_TOKENS_MAX) is None
        ):
            self._disagree()
            return tokens
        if tokens and completion > self._usage_seen:
            self._shaped.append((len(record.event_tokens), tokens))
            tokens = completion - self._usage_seen
        self._usage_seen = completion
        record.output_tokens = completion
        record.tokens_from_usage = True
        if type(prompt) is int:
            record.input_tokens = prompt
        cached = _cached_tokens(usage)
        if cached is not None:
            record.cached_tokens = cached
        return tokens

    def _content_events(self) -> int:
        """The events so far that carried content (each carries at least one token)."""
        tokens = self.record.event_tokens
        self._tally[1] += sum(1 for t in tokens[self._tally[0] :] if t)
        self._tally[0] = len(tokens)
        return self._tally[1]

    def _disagree(self) -> None:
        """Usage is not believed: the counted events stand (the ones usage set put back)."""
        record = self.record
        for position, counted in self._shaped:
            record.event_tokens[position] = counted
        self._shaped.clear()
        record.usage_disagreed = True
        record.tokens_from_usage = False
        record.input_tokens, record.cached_tokens = self._sent

    def finish(self, t_ns: int, tail: list[Event]) -> RequestRecord:
        """End of body at ``t_ns``; ``tail`` is the decoder's ``flush()``. Returns the record."""
        record = self.record
        for event in tail:
            if event.complete or event.data == _DONE:  # the end marker, its blank line cut
                self.on_event(event)
            else:
                record.fail(REASON_MALFORMED, f"{_CUT_EVENT}{event.data}")
        record.end_ns = t_ns
        if not self._done:
            record.fail(REASON_TRUNCATED, "stream ended without data: [DONE]")
        if not any(record.event_tokens):  # usage counts alone are not an answer
            record.fail(REASON_EMPTY, "no token streamed")
        if record.tokens_from_usage and record.output_tokens < self._content_events():
            self._disagree()  # fewer tokens than the events that each carried one
        if not record.tokens_from_usage:
            record.output_tokens = sum(record.event_tokens)
        return record


def decode_chunks(
    record: RequestRecord,
    chunks: Iterable[tuple[int, bytes]],
    end_ns: int,
    max_tokens: int | None = None,
) -> RequestRecord:
    """Decode a body captured as ``(perf_counter_ns at read, bytes)`` pairs into ``record``.

    Each event keeps the stamp of the read that completed it, exactly as if it had been decoded
    on arrival; ``end_ns`` is when the body ended; ``max_tokens``: the request's, when known
    (usage above it is not believed).
    """
    decoder = SSEDecoder()
    acc = StreamAccumulator(record, max_tokens)
    whole, on_data, on_events, feed = decoder.whole, acc.on_data, acc.on_events, decoder.feed
    for t_ns, data in chunks:
        payloads = whole(data)
        if payloads is not None:  # the common read: whole events, no Event object made
            for payload in payloads:
                on_data(payload, t_ns)
        else:
            on_events(feed(data, t_ns))
    return acc.finish(end_ns, decoder.flush(end_ns))


_NOT_STRICT = object()
_NUMBER = rb"(?:0|[1-9][0-9]*)"
_NAME = rb'"[^"\\\x00-\x1f]*"'  # a JSON string without escapes
#: The engines' common one-token chat chunk (SGLang's, vLLM's, the truth server's): one choice,
#: a ``content`` string, the other fields null or absent, no ``usage``; group 1 is the content's
#: JSON text (escapes checked, bytes not UTF-8 allowed: replacing them leaves it non-empty). What
#: it matches, ``json`` reads as a dict whose one choice carries that content and nothing that
#: counts besides, so the event is recorded without parsing (1 token, 0 for an empty content).
_ONE_TOKEN = re.compile(
    rb'\{"id":'
    + _NAME
    + rb',"object":"chat\.completion\.chunk",(?:"created":'
    + _NUMBER
    + rb',)?"model":'
    + _NAME
    + rb',"choices":\[\{"index":'
    + _NUMBER
    + rb',"delta":\{(?:"role":(?:null|"assistant"),)?"content":"((?:[^"\\\x00-\x1f]|'
    rb'\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*)"(?:,"reasoning_content":null)?(?:,"tool_calls":null)?'
    rb'\},(?:"logprobs":null,)?"finish_reason":null(?:,"matched_stop":null)?\}\]'
    rb'(?:,"usage":null)?\}'
)


def _inexact(chunk: ChatChunk) -> bool:
    """orjson reads an integer beyond 64 bits as a float, the standard library as an int: the
    only difference in what the interpretation reads (the usage counts)."""
    usage = chunk.get("usage")
    return type(usage) is dict and (
        type(usage.get("completion_tokens")) is float or type(usage.get("prompt_tokens")) is float
    )


def _parse(data: str) -> object:
    """``data`` as the standard library's ``json.loads`` reads it (None when it is not JSON):
    by orjson where that gives the same, else by ``json`` (NaN, Infinity, lone surrogates, a
    byte-order mark, integers beyond 64 bits)."""
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    else:
        chunk = chunk_of(parsed) if type(parsed) is dict else None
        if chunk is None or not _inexact(chunk):
            return parsed
    try:
        return json.loads(data)
    except ValueError:
        return None
