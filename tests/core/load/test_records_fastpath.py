"""decode_chunks' fast path (one whole event per read, orjson) gives exactly the records of the
plain path (every read through ``SSEDecoder.feed``, the standard library's ``json``), for every
payload below and at every split point."""

from __future__ import annotations

import json
from typing import Any

import pytest

from servelab.core.ledger.codec import encode
from servelab.core.load.records import (
    REASON_ABORTED,
    REASON_EMPTY,
    REASON_MALFORMED,
    REASON_SERVER_ERROR,
    REASON_TRUNCATED,
    RequestRecord,
    decode_chunks,
)
from servelab.core.load.sse import Event, SSEDecoder

# -- the oracle: the interpretation as it was before the fast path, on json.loads ---------------


def _content(choice: dict[str, Any]) -> str:
    delta = choice.get("delta")
    if isinstance(delta, dict):
        text = delta.get("content") or delta.get("reasoning_content") or ""
        return text if isinstance(text, str) else ""
    text = choice.get("text") or ""
    return text if isinstance(text, str) else ""


def _oracle_event(record: RequestRecord, state: dict[str, Any], event: Event) -> None:
    if event.data == "[DONE]":
        state["done"] = True
        return
    if state["broken"]:
        return
    try:
        chunk = json.loads(event.data)
    except ValueError:
        chunk = None
    if not isinstance(chunk, dict):
        state["broken"] = True
        record.fail(REASON_MALFORMED, "an event whose data is not a JSON object: " + event.data)
        return
    if "error" in chunk or chunk.get("object") == "error":
        state["broken"] = True
        record.fail(REASON_SERVER_ERROR, event.data)
        return
    choices = chunk.get("choices") or []
    tokens = sum(1 for c in choices if isinstance(c, dict) and _content(c))
    if any(isinstance(c, dict) and c.get("finish_reason") == "abort" for c in choices):
        record.fail(REASON_ABORTED, 'a choice ended with finish_reason "abort"')
    usage = chunk.get("usage")
    counted = tokens
    state["content"] += 1 if tokens else 0
    if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
        tokens = _oracle_usage(record, state, usage, tokens)
    if tokens or choices:
        state["counted"].append(counted)
        record.event_ns.append(event.t_ns)
        record.event_tokens.append(tokens)


def _believed(value: object, bound: int) -> bool:
    return type(value) is int and 0 <= value <= bound


def _oracle_usage(
    record: RequestRecord, state: dict[str, Any], usage: dict[str, Any], tokens: int
) -> int:
    """Usage taken while every count is a whole number in bounds (64 tokens a content event,
    10^7 prompt tokens); after one that is not, ignored and the record flagged."""
    if record.usage_disagreed:
        return tokens
    completion, prompt = usage["completion_tokens"], usage.get("prompt_tokens")
    believed = _believed(completion, 64 * max(1, state["content"]))
    if not believed or (prompt is not None and not _believed(prompt, 10**7)):
        record.usage_disagreed, record.tokens_from_usage, record.input_tokens = True, False, 0
        return tokens
    if tokens and completion > state["seen"]:
        tokens = completion - state["seen"]
    state["seen"] = completion
    record.output_tokens, record.tokens_from_usage = completion, True
    if type(prompt) is int:
        record.input_tokens = prompt
    return tokens


def _oracle(reads: list[tuple[int, bytes]], end_ns: int) -> RequestRecord:
    record = RequestRecord(index=0, scheduled_ns=0)
    state: dict[str, Any] = {"done": False, "broken": False, "seen": 0, "content": 0, "counted": []}
    decoder = SSEDecoder()
    for t_ns, data in reads:
        for event in decoder.feed(data, t_ns):
            _oracle_event(record, state, event)
    for event in decoder.flush(end_ns):
        if event.complete or event.data == "[DONE]":  # the end marker, its blank line cut
            _oracle_event(record, state, event)
        else:
            cut = "the stream ended inside an event (no blank line after it): "
            record.fail(REASON_MALFORMED, cut + event.data)
    record.end_ns = end_ns
    if not state["done"]:
        record.fail(REASON_TRUNCATED, "stream ended without data: [DONE]")
    if not any(record.event_tokens):
        record.fail(REASON_EMPTY, "no token streamed")
    too_few = record.output_tokens < sum(1 for t in record.event_tokens if t)
    if record.tokens_from_usage and too_few:
        record.usage_disagreed, record.tokens_from_usage, record.input_tokens = True, False, 0
    if record.usage_disagreed:
        record.event_tokens = state["counted"]
    if not record.tokens_from_usage:
        record.output_tokens = sum(record.event_tokens)
    return record


# -- payloads -------------------------------------------------------------------------------------

_TOKEN = b'{"id":"t","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":" w"},"finish_reason":null}]}'  # noqa: E501
_SGLANG = b'{"id":"a1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":null,"content":"x","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}'  # noqa: E501
_VLLM = b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":"y"},"logprobs":null,"finish_reason":null}]}'  # noqa: E501


def _tok(content: bytes, head: bytes = b'{"id":"t","object":"chat.completion.chunk",') -> bytes:
    """The truth server's token chunk with another content (JSON text) or another head."""
    return (
        head
        + b'"model":"m","choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}]}'
        % content
    )


ODD = [
    _TOKEN,
    _SGLANG,
    _VLLM,
    _tok(b""),
    _tok(b'a\\n\\"\\u00e9\\/'),  # escapes
    _tok(b"\\q"),  # not a JSON escape
    _tok(b"\\u12"),  # a short \u escape
    _tok(b"a\tb"),  # a raw control character
    _tok(b"\xff\xfe ok"),  # not UTF-8
    _tok(b"\\ud83d\\ude00"),  # a surrogate pair
    _tok(b"x", b'{"id":"t\\"","object":"chat.completion.chunk",'),  # an escape in the id
    _tok(b"x", b'{"id":"t","object":"chat.completion.chunk","created":01,'),  # a leading zero
    _tok(b"x", b'{"id":"t","object":"error",'),
    _tok(b"x", b'{"error":1,"id":"t","object":"chat.completion.chunk",'),
    _SGLANG.replace(b'"role":null', b'"role":"assistant"'),
    _SGLANG.replace(b'"content":"x"', b'"content":""'),
    _SGLANG.replace(b'"reasoning_content":null', b'"reasoning_content":"r"'),
    _SGLANG.replace(b'"usage":null', b'"usage":{"completion_tokens":7}'),
    _SGLANG.replace(b'"index":0', b'"index":-0'),
    _VLLM.replace(b'"finish_reason":null', b'"finish_reason":"length"'),
    _VLLM + b" ",
    b'{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}',
    b'{"choices":[{"index":0,"text":" t"}],"object":"text_completion"}',
    b'{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3}}',
    b'{"choices":[{"delta":{"content":"a"}},{"delta":{"reasoning_content":"b"}}]}',
    b'{"choices":[{"delta":{"content":5}},"x",null]}',
    b'{"choices":[{"delta":{"content":"a"}}],"choices":[]}',  # duplicate key: the last wins
    b'{"choices":[{"delta":{"content":"a"}}],"usage":{"completion_tokens":1e400}}',
    b'{"choices":[{"delta":{"content":"a"}}],"usage":{"completion_tokens":123456789012345678901234567890}}',
    b'{"choices":[{"delta":{"content":"a"}}],"usage":{"completion_tokens":true}}',
    b'{"choices":[],"usage":{"completion_tokens":18446744073709551615,"prompt_tokens":-9223372036854775809}}',
    b'{"choices":[],"usage":{"completion_tokens":18446744073709551616,"prompt_tokens":2}}',
    b'{"choices":[],"usage":{"completion_tokens":4,"prompt_tokens":1.5}}',
    b'{"choices":[{"delta":{"content":NaN}}]}',  # the standard library accepts NaN
    b'{"choices":[{"delta":{"content":"\\ud800"}}]}',  # a lone surrogate
    b'{"choices":[{"delta":{"content":"\xff\xfe"}}]}',  # not UTF-8: replaced, then parsed
    '{"choices":[{"delta":{"content":"désolé ✗ 🙂"}}]}'.encode(),
    b'\xef\xbb\xbf{"choices":[]}',  # a byte-order mark
    b'{"choices":[{"delta":{"content":"a\tb"}}]}',  # a raw control character
    b'  {"choices":[{"delta":{"content":"a"}}]}  ',
    b'{"choices":[{"delta":{"content":"a"}}]} x',
    b'{"error":{"message":"boom"}}',
    b'{"object":"error","message":"boom"}',
    b'{"choices":[{"delta":{"content":"error"}}]}',
    b"{'error': {'message': 'dec",
    b"[1,2]",
    b'"text"',
    b"null",
    b"",
    b"[DONE] ",
    b'{"choices":null,"usage":null}',
]


def _body(payloads: list[bytes], done: bool = True) -> list[bytes]:
    events = [b"data: " + p + b"\n\n" for p in payloads]
    return events + ([b"data: [DONE]\n\n"] if done else [])


def _same(reads: list[tuple[int, bytes]]) -> None:
    got = decode_chunks(RequestRecord(index=0, scheduled_ns=0), reads, 999)
    assert encode(got) == encode(_oracle(reads, 999))


@pytest.mark.parametrize("payload", ODD, ids=range(len(ODD)))
def test_each_payload_one_read_per_event(payload: bytes) -> None:
    events = _body([_TOKEN, payload, _TOKEN])
    _same([(10 * (i + 1), e) for i, e in enumerate(events)])


@pytest.mark.parametrize("payload", ODD, ids=range(len(ODD)))
def test_each_payload_at_every_split_point(payload: bytes) -> None:
    raw = b"".join(_body([_TOKEN, payload, _TOKEN]))
    for cut in range(len(raw) + 1):
        _same([(10, raw[:cut]), (20, raw[cut:])])


def test_all_payloads_in_one_stream_mixed_reads() -> None:
    events = _body(ODD)
    reads = [(i, e) for i, e in enumerate(events)]
    _same(reads)
    _same([(1, b"".join(events[:3])), *reads[3:]])  # a read of three events, then singles
    _same([*reads[:2], (5, b": comment\n"), *reads[2:]])  # a comment line between events


def test_single_read_forms_that_are_not_one_whole_event() -> None:
    forms = [b"data: a\r\n\r\n", b"data: a\n\ndata: b\n\n", b"data:a\n\n", b"data: a\n", b"\n\n"]
    for form in forms:
        _same([(1, form), (2, b"data: [DONE]\n\n")])
    _same([(1, b"event: x\n"), (2, b"data: " + _TOKEN + b"\n\n"), (3, b"data: [DONE]\n\n")])
    _same([(1, b"data: " + _TOKEN + b"\r"), (2, b"\ndata: [DONE]\n\n")])  # a split CRLF


def test_truncated_and_broken_streams() -> None:
    _same([(i, e) for i, e in enumerate(_body([_TOKEN, _TOKEN], done=False))])
    _same([(1, b"data: " + _TOKEN + b"\n\n"), (2, b'data: {"cho')])
    broken = _body([_TOKEN, b"{bad", _TOKEN, b'{"error":1}'])
    _same([(i, e) for i, e in enumerate(broken)])


def test_whole_returns_the_data_only_when_the_decoder_is_idle() -> None:
    decoder = SSEDecoder()
    assert decoder.whole(b"data: x\n\n") == [b"x"]
    assert decoder.whole(b"data: x\n\ndata: \n\ndata: [DONE]\n\n") == [b"x", b"", b"[DONE]"]
    assert decoder.whole(b"data: x\n\n\n\n") is None  # a blank line more
    assert decoder.whole(b"data: x\n\ndata: y\ndata: z\n\n") is None  # a two-line event
    assert decoder.whole(b"data: x\n\nid: 1\n\n") is None
    assert decoder.feed(b"data: par", 1) == []
    assert decoder.whole(b"data: x\n\n") is None  # an unfinished line is held


def test_runs_of_whole_events_in_one_read() -> None:
    events = _body(ODD)
    for size in (2, 3, 5):
        reads = [(i, b"".join(events[i : i + size])) for i in range(0, len(events), size)]
        _same(reads)
    _same([(1, b"".join(events))])
    _same([(1, b"".join(events[:4]) + b"data: x\n"), (2, b"\n" + b"".join(events[4:]))])
