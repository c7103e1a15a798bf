"""StreamAccumulator: content counting, usage, in-band errors, malformed and truncated streams."""

from __future__ import annotations

import json

from servelab.core.records import (
    REASON_MALFORMED,
    REASON_SERVER_ERROR,
    REASON_TRUNCATED,
    RequestRecord,
    StreamAccumulator,
    decode_chunks,
    record_from_dict,
    record_to_dict,
)
from servelab.core.sse import SSEDecoder


def _chunk(content: str | None = None, role: str | None = None, usage: int | None = None) -> str:
    delta = {k: v for k, v in (("role", role), ("content", content)) if v is not None}
    body: dict[str, object] = {"choices": [{"index": 0, "delta": delta}]}
    if usage is not None:
        body = {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": usage}}
    return "data: " + json.dumps(body) + "\n\n"


def _run(text: str, reads: int = 1) -> RequestRecord:
    record = RequestRecord(index=0, scheduled_ns=0)
    acc, decoder = StreamAccumulator(record), SSEDecoder()
    raw = text.encode()
    step = max(len(raw) // reads, 1)
    for i, start in enumerate(range(0, len(raw), step)):
        acc.on_events(decoder.feed(raw[start : start + step], 100 * (i + 1)))
    return acc.finish(10_000, decoder.flush(10_000))


def test_role_chunk_has_no_tokens_and_usage_wins() -> None:
    text = _chunk("", role="assistant") + _chunk("a") + _chunk("b") + _chunk(usage=5)
    record = _run(text + "data: [DONE]\n\n", reads=4)
    assert record.ok
    assert record.event_tokens == [0, 1, 1]
    assert (record.output_tokens, record.tokens_from_usage, record.input_tokens) == (5, True, 9)


def test_without_usage_tokens_are_counted_events() -> None:
    record = _run(_chunk("a") + _chunk("b") + _chunk("c") + "data: [DONE]\n\n")
    assert (record.output_tokens, record.tokens_from_usage) == (3, False)


def test_router_malformed_error_fails_as_malformed_stream() -> None:
    record = _run(_chunk("a") + "data: {'error': {'message': 'dec")
    assert record.error == REASON_MALFORMED
    assert "'error'" in record.error_detail


def test_json_error_event_in_stream() -> None:
    record = _run('data: {"error": {"message": "boom"}}\n\ndata: [DONE]\n\n')
    assert record.error == REASON_SERVER_ERROR


def test_stream_without_done_is_truncated() -> None:
    record = _run(_chunk("a") + _chunk("b"))
    assert record.error == REASON_TRUNCATED
    assert record.end_ns == 10_000


def test_record_dict_round_trip() -> None:
    record = _run(_chunk("a") + "data: [DONE]\n\n")
    assert record_from_dict(record_to_dict(record)) == record


def test_decode_chunks_stamps_events_with_their_completing_read() -> None:
    raw = (_chunk("", role="assistant") + _chunk("a") + _chunk("b") + "data: [DONE]\n\n").encode()
    cut = len(_chunk("", role="assistant")) + 5
    record = decode_chunks(
        RequestRecord(index=0, scheduled_ns=0), [(10, raw[:cut]), (20, raw[cut:])], 30
    )
    assert record.ok
    assert record.event_ns == [10, 20, 20]
    assert (record.event_tokens, record.end_ns) == ([0, 1, 1], 30)
