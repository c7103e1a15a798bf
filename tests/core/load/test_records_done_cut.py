"""Issue 38 (34th pass): "1 malformed stream" at C256 on the simulated PD stack behind the real
router. The bytes caught on the wire (the router's last chunk, unframed): the end marker without
its blank line, ``data: [DONE]\\n``. sglang-router stops relaying the decode worker's answer at the
read that carries ``data: [DONE]``; when that read ends right after the marker (or its first
newline), the rest never comes. Every token came: the end marker stands. Any other event cut at
the end is still a malformed stream, and its detail now says what was wrong with it."""

from __future__ import annotations

import pytest

from servelab.core.load.records import REASON_MALFORMED, RequestRecord, decode_chunks

_ID = b'{"id":"22825e8cef134814afd06eedf4f6e064","object":"chat.completion.chunk",'
_ID += b'"created":1796599278,"model":"servelab-sim",'
_TOKEN = (
    b"data: "
    + _ID
    + b'"choices":[{"index":0,"delta":{"content":" here"},"finish_reason":null}]}\n\n'
)
#: The last read of request 181 of a C256 run, as the client unframed it (the router's chunk).
_LAST = (
    b"data: " + _ID + b'"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\n'
    b"data: " + _ID + b'"choices":[],"usage":{"prompt_tokens":130,"completion_tokens":64,'
    b'"total_tokens":194}}\n\ndata: [DONE]\n'
)  # fmt: skip


def _decode(*reads: bytes) -> RequestRecord:
    record = RequestRecord(index=181, scheduled_ns=0)
    return decode_chunks(record, [(10 * (i + 1), r) for i, r in enumerate(reads)], 1_000)


@pytest.mark.parametrize("cut", [b"\n", b""])
def test_an_end_marker_whose_blank_line_the_router_dropped_ends_the_stream(cut: bytes) -> None:
    """Before the fix: ``malformed stream``, its detail ``[DONE]``."""
    record = _decode(_TOKEN, _TOKEN * 3, _LAST[:-1] + cut)
    assert record.ok, (record.error, record.error_detail)
    assert (record.output_tokens, record.tokens_from_usage, record.input_tokens) == (64, True, 130)
    assert record.event_tokens == [1, 1, 1, 1, 0]


def test_an_end_marker_cut_inside_is_still_malformed_and_the_detail_says_where() -> None:
    record = _decode(_TOKEN, b"data: [DON")
    assert record.error == REASON_MALFORMED
    assert record.error_detail == "the stream ended inside an event (no blank line after it): [DON"


def test_an_event_that_is_not_json_says_so_and_keeps_a_bounded_masked_sample() -> None:
    secret = "sk-" + "A1b2C3d4" * 6
    bad = b"data: <html>upstream said " + secret.encode() + b" " + b"x" * 500 + b"\n\n"
    for reads in ((_TOKEN, bad, b"data: [DONE]\n\n"), (_TOKEN, bad[:-2])):
        record = _decode(*reads)
        assert record.error == REASON_MALFORMED, reads
        assert record.error_detail.startswith(
            ("an event whose data is not a JSON object: <html>upstream said ",
             "the stream ended inside an event (no blank line after it): <html>")
        ), record.error_detail  # fmt: skip
        assert len(record.error_detail) <= 300 and "A1b2C3d4" not in record.error_detail


def test_a_second_event_after_the_cut_marker_is_not_taken_for_it() -> None:
    """Only an unterminated event whose data is exactly ``[DONE]`` is the end marker."""
    record = _decode(_TOKEN, b"data: [DONE]\ndata: more")
    assert record.error == REASON_MALFORMED and record.error_detail.endswith("[DONE]\nmore")
