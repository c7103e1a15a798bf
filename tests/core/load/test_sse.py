"""The sans-I/O SSE decoder: line endings, split and merged reads, comments, unterminated events."""

from __future__ import annotations

import pytest

from servelab.core.load.sse import Event, SSEDecoder

STREAM = 'data: {"a": 1}\n\ndata: {"b": 2}\n\ndata: [DONE]\n\n'


@pytest.mark.parametrize("eol", ["\n", "\r", "\r\n"])
def test_all_three_line_endings(eol: str) -> None:
    decoder = SSEDecoder()
    events = decoder.feed(STREAM.replace("\n", eol).encode(), 7)
    assert [e.data for e in events] == ['{"a": 1}', '{"b": 2}', "[DONE]"]
    assert all(e.t_ns == 7 for e in events)
    assert decoder.flush(8) == []


@pytest.mark.parametrize("eol", ["\n", "\r", "\r\n"])
def test_every_split_point_gives_the_same_events(eol: str) -> None:
    raw = STREAM.replace("\n", eol).encode()
    for cut in range(len(raw) + 1):
        decoder = SSEDecoder()
        events = decoder.feed(raw[:cut], 1) + decoder.feed(raw[cut:], 2)
        assert [e.data for e in events] == ['{"a": 1}', '{"b": 2}', "[DONE]"], cut


def test_byte_by_byte_stamps_each_event_with_its_completing_read() -> None:
    decoder = SSEDecoder()
    events: list[Event] = []
    for i, byte in enumerate(STREAM.encode()):
        events += decoder.feed(bytes([byte]), i)
    ends = [i for i, ch in enumerate(STREAM) if ch == "\n" and STREAM[i - 1] == "\n"]
    assert [e.t_ns for e in events] == ends


def test_crlf_split_between_reads_is_one_line_end() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: x\r", 1) == []
    assert decoder.feed(b"\n\r", 2)[0].data == "x"
    assert decoder.feed(b"\ndata: y\r\n\r\n", 3)[0].data == "y"


def test_multiline_data_comments_event_and_id_fields() -> None:
    decoder = SSEDecoder()
    raw = b": keep-alive\nevent: delta\nid: 42\ndata: one\ndata:two\n\n"
    (event,) = decoder.feed(raw, 5)
    assert (event.data, event.event, event.id) == ("one\ntwo", "delta", "42")


def test_utf8_character_split_across_reads() -> None:
    raw = "data: héllo ✓\n\n".encode()
    decoder = SSEDecoder()
    events = decoder.feed(raw[:8], 1) + decoder.feed(raw[8:], 2)
    assert events[0].data == "héllo ✓"


def test_empty_role_chunk_is_still_an_event() -> None:
    decoder = SSEDecoder()
    raw = b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'
    assert len(decoder.feed(raw, 1)) == 1


def test_router_malformed_truncated_error_is_returned_incomplete() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: {'error': {'message': 'decode fai", 1) == []
    (event,) = decoder.flush(2)
    assert not event.complete
    assert event.data.startswith("{'error'")


def test_blank_lines_without_data_dispatch_nothing() -> None:
    assert SSEDecoder().feed(b"\n\n\r\n: c\n\n", 1) == []


def test_the_one_event_per_read_fast_path_keeps_event_names_and_ids() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"event: ping\n", 1) == []
    assert decoder.feed(b"data: x\n\n", 2) == [Event("x", 2, "ping")]
    assert decoder.feed(b"id: 7\n\n", 3) == []
    assert decoder.feed(b"data: y\n\n", 4) == [Event("y", 4, "message", "7")]
    assert decoder.feed(b"data: a\ndata: b\n\n", 5) == [Event("a\nb", 5, "message", "7")]
    assert decoder.feed(b"data: z\r\n\r\n", 6) == [Event("z", 6, "message", "7")]
