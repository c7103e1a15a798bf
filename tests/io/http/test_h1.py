"""The sans-I/O HTTP/1.1 response parser: every framing, at every split point, and its errors."""

from __future__ import annotations

import pytest

from servelab.errors import ProtocolError
from servelab.io.http.h1 import ResponseParser, request_head

BODY = b'data: {"a": 1}\n\ndata: [DONE]\n\n'
CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"10;ext=1\r\n" + BODY[:16] + b"\r\n" + b"%x\r\n" % (len(BODY) - 16) + BODY[16:] + b"\r\n"
    b"0\r\nX-Trailer: yes\r\n\r\n"
)
LENGTH = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
INTERIM = b"HTTP/1.1 100 Continue\r\n\r\n" + LENGTH


def _feed_all(parser: ResponseParser, pieces: list[bytes]) -> bytes:
    return b"".join(parser.feed(piece) for piece in pieces)


@pytest.mark.parametrize("raw", [CHUNKED, LENGTH, INTERIM], ids=["chunked", "length", "100"])
def test_every_split_point_gives_the_same_body(raw: bytes) -> None:
    for cut in range(len(raw) + 1):
        for cut2 in (cut, min(cut + 3, len(raw))):
            parser = ResponseParser()
            body = _feed_all(parser, [raw[:cut], raw[cut:cut2], raw[cut2:]])
            assert body == BODY, (cut, cut2)
            assert parser.done and parser.status == 200 and parser.keep_alive


def test_byte_by_byte() -> None:
    parser = ResponseParser()
    assert _feed_all(parser, [bytes([b]) for b in CHUNKED]) == BODY
    assert parser.done and parser.headers["content-type"] == "text/event-stream"


def test_the_head_is_known_before_the_body_ends() -> None:
    parser = ResponseParser()
    assert parser.feed(CHUNKED[:90]) == b""
    assert parser.head_done and not parser.done and parser.status == 200


def test_read_until_close_and_connection_close() -> None:
    parser = ResponseParser()
    assert parser.feed(b"HTTP/1.1 200 OK\r\n\r\nabc") == b"abc"
    assert parser.until_close and not parser.keep_alive and not parser.done
    assert parser.feed(b"def") == b"def"
    parser.eof()
    assert parser.done
    parser.reset()
    parser.feed(b"HTTP/1.1 500 Oops\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno")
    assert parser.done and parser.status == 500 and parser.reason == "Oops"
    assert not parser.keep_alive


def test_http10_keep_alive_only_when_asked() -> None:
    parser = ResponseParser()
    parser.feed(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
    assert parser.done and not parser.keep_alive
    parser.reset()
    parser.feed(b"HTTP/1.0 204 No Content\r\nConnection: keep-alive\r\n\r\n")
    assert parser.done and parser.keep_alive


@pytest.mark.parametrize(
    ("raw", "phase"),
    [
        (b"HTTX/1.1 200 OK\r\n\r\n", "head"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "head"),
        (b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "head"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "head"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "body"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", "body"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n", "body"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab", "body"),
        # latin-1 superscripts are str digits int() refuses: a ValueError escaped the parser
        (b"HTTP/1.1 \xb2\xb2\xb2 OK\r\n\r\n", "head"),
        (b"HTTP/1.1 2\xb9\xb3 OK\r\n\r\n", "head"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n", "head"),
    ],
)
def test_bad_framing_is_an_error_with_its_phase(raw: bytes, phase: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        ResponseParser().feed(raw)
    assert caught.value.phase == phase


def test_a_close_before_the_end_is_an_error_in_its_phase() -> None:
    head = ResponseParser()
    head.feed(b"HTTP/1.1 200")
    with pytest.raises(ProtocolError) as early:
        head.eof()
    assert early.value.phase == "head"
    body = ResponseParser()
    body.feed(LENGTH[:-3])
    with pytest.raises(ProtocolError) as late:
        body.eof()
    assert late.value.phase == "body"


def test_bytes_after_the_response_are_an_error() -> None:
    with pytest.raises(ProtocolError):
        ResponseParser().feed(CHUNKED + b"HTTP/1.1 200 OK\r\n")


def test_request_head() -> None:
    head = request_head("POST", "/v1/x", "h:1", {"Content-Type": "application/json"}, 5)
    assert head == (
        b"POST /v1/x HTTP/1.1\r\nHost: h:1\r\nContent-Length: 5\r\n"
        b"Content-Type: application/json\r\n\r\n"
    )


def test_one_whole_chunk_per_read_and_its_lookalikes() -> None:
    parser = ResponseParser()
    parser.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert parser.feed(b"3\r\nabc\r\n") == b"abc"
    assert parser.feed(b"3;x=1\r\nabc\r\n") == b"abc"  # an extension: the general path
    assert parser.feed(b"2\r\nab\r\n2\r\ncd\r\n") == b"abcd"  # two chunks in one read
    assert parser.feed(b"4\r\nab\r\n") == b"ab\r\n"  # the CRLF is data here
    assert parser.feed(b"\r\n0\r\n\r\n") == b"" and parser.done


def _outcome(pieces: list[bytes]) -> tuple[bytes, bool, str | None]:
    parser, body = ResponseParser(), b""
    try:
        for piece in pieces:
            body += parser.feed(piece)
    except ProtocolError as exc:  # the body read so far depends on the split: the phase does not
        return b"", parser.done, exc.phase
    return body, parser.done, None


_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
_RUNS = [
    b"3\r\nabc\r\n5\r\nde\r\nf\r\n",  # a CRLF inside the data of the second chunk
    b"1\r\na\r\n1\r\nb\r\n1\r\nc\r\n0\r\n\r\n",  # whole chunks, then the last one
    b"2\r\nab\r\n2;e=1\r\ncd\r\n",  # an extension in the second size line
    b"2\r\nab\r\n2\r\ncdx\r\n",  # no CRLF after the second chunk's data
    b"2\r\nab\r\nzz\r\ncd\r\n",  # a bad second size
    b"2\r\nab\r\n2\r\ncd",  # the second chunk unfinished
    b"2\r\nab\r\n\r\n",  # an empty size line
    b"a\r\n0123456789\r\n10\r\n0123456789abcdef\r\n",
    b"2\r\nab\r\n0x2\r\ncd\r\n",
]


@pytest.mark.parametrize("run", _RUNS, ids=range(len(_RUNS)))
def test_runs_of_whole_chunks_in_one_read_match_the_byte_by_byte_parse(run: bytes) -> None:
    slow = _outcome([_HEAD, *(bytes([b]) for b in run)])
    assert _outcome([_HEAD, run]) == slow
    for cut in range(len(run) + 1):
        assert _outcome([_HEAD, run[:cut], run[cut:]]) == slow, cut
