"""StreamAccumulator: content counting, usage, in-band errors, malformed and truncated streams."""

from __future__ import annotations

import json

import pytest

from servelab.core.ledger.codec import decode, encode
from servelab.core.load.identity import request_identity
from servelab.core.load.records import (
    REASON_MALFORMED,
    REASON_SERVER_ERROR,
    REASON_TRUNCATED,
    RequestRecord,
    StreamAccumulator,
    decode_chunks,
)
from servelab.core.load.sse import SSEDecoder
from servelab.io.ledger.packed import pack_record, unpack_record
from tests.support.old_rows import packed_v1


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
    assert decode(RequestRecord, encode(record)) == record


def test_decode_chunks_stamps_events_with_their_completing_read() -> None:
    raw = (_chunk("", role="assistant") + _chunk("a") + _chunk("b") + "data: [DONE]\n\n").encode()
    cut = len(_chunk("", role="assistant")) + 5
    record = decode_chunks(
        RequestRecord(index=0, scheduled_ns=0), [(10, raw[:cut]), (20, raw[cut:])], 30
    )
    assert record.ok
    assert record.event_ns == [10, 20, 20]
    assert (record.event_tokens, record.end_ns) == ([0, 1, 1], 30)


# -- the compact form ----------------------------------------------------------------------------


def _measured(i: int = 0, events: int = 48, base: int = 250_000_000_000_000) -> RequestRecord:
    """A record as a real run leaves it: perf_counter_ns stamps, ~20 ms between events."""
    sent = base + i * 1_000_000 + 37_211
    first = sent + 412_345_678
    stamps = [first + k * 21_000_000 + (k * 7919) % 100_003 for k in range(events)]
    return RequestRecord(
        index=i, scheduled_ns=base + i * 1_000_000, input_tokens=512, sent_ns=sent,
        first_byte_ns=first, end_ns=stamps[-1] + 5_000, status=200, output_tokens=events,
        tokens_from_usage=True, event_ns=stamps, event_tokens=[1] * events,
    )  # fmt: skip


def test_a_packed_record_comes_back_exactly_and_five_times_smaller() -> None:
    data = encode(_measured())
    packed = pack_record(data)
    assert packed is not None and unpack_record(packed) == data
    as_json = json.dumps(data, sort_keys=True, separators=(",", ":"))
    assert len(as_json) / len(packed) >= 5.0, (len(as_json), len(packed))


def test_every_field_shape_round_trips() -> None:
    failed = RequestRecord(index=7, scheduled_ns=-5, sent_ns=-3, status=0, error="http 500",
                           error_detail="désolé ✗", warmup=True)  # fmt: skip
    slow = _measured(events=3)
    slow.event_ns[2] += 10 * 10**9  # a 10 s gap: the deltas no longer fit in 32 bits
    mixed = _measured(events=4)
    mixed.event_tokens = [0, 3, 300, 70_000]
    huge = _measured(events=2)
    huge.event_tokens = [2**40, -1]
    empty = RequestRecord(index=0, scheduled_ns=0)
    for record in (failed, slow, mixed, huge, empty):
        data = encode(record)
        packed = pack_record(data)
        assert packed is not None and unpack_record(packed) == data
        assert decode(RequestRecord, unpack_record(packed)) == record


def test_what_is_not_a_request_record_is_not_packed() -> None:
    data = encode(_measured(events=2))
    assert pack_record({"a": 1}) is None
    assert pack_record({**data, "extra": 1}) is None
    assert pack_record({**data, "warmup": 1}) is None  # an int is not a bool here
    assert pack_record({**data, "index": True}) is None  # nor a bool an int
    assert pack_record({**data, "event_ns": [1.5, 2.0]}) is None
    assert pack_record({**data, "event_tokens": [1]}) is None  # lengths differ
    with pytest.raises(ValueError, match="not a packed"):
        unpack_record(b"\x09junk")


def test_cached_tokens_and_session_round_trip_and_old_tails_still_read() -> None:
    cached = _measured(events=2)
    cached.cached_tokens, cached.session = 0, 3
    ids_only = _measured(events=2)
    ids_only.request_id, ids_only.traceparent = "rid", "00-tp"
    neither = RequestRecord(index=1, scheduled_ns=0, cached_tokens=1200)
    for record in (cached, ids_only, neither):
        packed = pack_record(encode(record))
        assert packed is not None and decode(RequestRecord, unpack_record(packed)) == record
    # a blob an older servelab wrote: the ids' tail without the numbers
    old = pack_record(encode(ids_only))
    assert old is not None and old.endswith(b"\x00\x00")
    back = unpack_record(old[:-2])
    assert (back["request_id"], back["cached_tokens"], back["session"]) == ("rid", None, None)
    assert pack_record({**encode(cached), "cached_tokens": -1}) is None


DETAILS_7 = {"cached_tokens": 7}
NOT_A_COUNT = {"cached_tokens": "7"}


USAGE = {"prompt_tokens": 9, "completion_tokens": 1}


@pytest.mark.parametrize(
    ("details", "expected"),
    [
        ({}, None),  # no prompt_tokens_details: the report is off
        ({"prompt_tokens_details": None}, 0),  # SGLang's way of saying 0
        ({"prompt_tokens_details": {"cached_tokens": 7}}, 7),
        ({"prompt_tokens_details": {}}, None),
        ({"prompt_tokens_details": {"cached_tokens": "7"}}, None),
    ],
)
def test_the_usage_cached_tokens_are_read_as_the_engines_write_them(
    details: dict[str, object], expected: int | None
) -> None:
    usage = USAGE | details
    record = _run(_chunk("a") + "data: " + json.dumps({"choices": [], "usage": usage}) + "\n\n"
                  + "data: [DONE]\n\n")  # fmt: skip
    assert record.input_tokens == 9 and record.cached_tokens == expected


def test_a_tool_calls_argument_fragments_are_its_tokens() -> None:
    """An agent's answer is often a tool call: its first fragment is its first token (TTFT)."""

    def call(delta: dict[str, object]) -> str:
        return "data: " + json.dumps({"choices": [{"index": 0, "delta": delta}]}) + "\n\n"

    head = call({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                 "function": {"name": "read_file", "arguments": ""}}]})  # fmt: skip
    parts = [call({"tool_calls": [{"index": 0, "function": {"arguments": a}}]})
             for a in ('{"path"', ': "a.py"}')]  # fmt: skip
    record = _run(head + "".join(parts) + "data: [DONE]\n\n")
    assert record.event_tokens == [0, 1, 1] and record.output_tokens == 2


def test_a_servelab_request_id_costs_nine_bytes_and_other_ids_are_kept_as_written() -> None:
    record = _measured()
    plain = pack_record(encode(record))
    record.request_id, record.traceparent = request_identity("00000000000000aa", record.index)
    blob = pack_record(encode(record))
    assert plain is not None and blob is not None and unpack_record(blob) == encode(record)
    assert len(blob) - len(plain) == 1 + 8 + 2  # the mode, the 8-byte tag; the two numbers
    for rid, tp in (
        ("my-own-id", ""),  # a user's header
        (record.request_id, record.traceparent.replace("-01", "-00")),  # not the pair made
        ("servelab-00000000000000aa-999", record.traceparent),  # another index
    ):
        record.request_id, record.traceparent = rid, tp
        data = encode(record)
        packed = pack_record(data)
        assert packed is not None and unpack_record(packed) == data


def test_blobs_written_before_version_2_still_read() -> None:
    record = _measured(events=3)
    record.request_id, record.traceparent = request_identity("00000000000000ab", record.index)
    record.cached_tokens, record.session = 40, 2
    assert unpack_record(packed_v1(record)) == encode(record)


@pytest.mark.parametrize("at", [0, 150, 280, 296, 299])
def test_a_failures_detail_is_kept_with_its_tokens_masked_wherever_it_is_cut(at: int) -> None:
    """An engine's error message quoting a token (issue 38's seventh pass): the kept detail
    masks it, a token across the 300-character cut too (never its first characters in view)."""
    token = "sk-proj-AAAAhostile0123456789abcdefXYZ"
    record = RequestRecord(index=0, scheduled_ns=0)
    record.fail("http 500", "x" * at + f" {token} " + "y" * 400)
    assert record.error == "http 500" and len(record.error_detail) <= 300
    assert "sk-" not in record.error_detail and "AAAA" not in record.error_detail
    if at < 290:
        assert "***" in record.error_detail
