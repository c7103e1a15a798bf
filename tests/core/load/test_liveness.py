"""What keeps a stream alive for the idle timeout: the bytes of a ``data:`` line, wherever the
reads split it; comments, blank lines and other fields do not."""

from __future__ import annotations

import pytest

from servelab.core.load.liveness import DataLines


def _feed(*reads: bytes) -> list[bool]:
    lines = DataLines()
    return [lines.feed(read) for read in reads]


def test_comments_blank_lines_and_other_fields_are_not_alive() -> None:
    assert (
        _feed(b": keepalive\n\n", b"\n", b"\r\n", b"event: ping\n", b"id: 3\nretry: 5\n")
        == [False] * 5
    )


def test_a_whole_event_and_a_token_are_alive() -> None:
    assert _feed(b'data: {"choices":[]}\n\n', b"data: [DONE]\n\n") == [True, True]


@pytest.mark.parametrize("cut", range(1, len(b"data: x\n\n")))
def test_a_data_line_split_anywhere_is_alive_once_its_field_is_known(cut: int) -> None:
    event = b"data: x\n\n"
    first, rest = event[:cut], event[cut:]
    got = _feed(first, rest)
    assert got[0] == (cut >= len(b"data:"))  # "d", "da", ... "data" are not known yet
    assert any(got)


def test_a_comment_that_looks_like_data_later_is_not_alive() -> None:
    assert _feed(b": data: x\n", b"x data: y\n", b"dat", b"um\n") == [False] * 4


def test_a_data_line_after_comments_in_one_read_is_alive() -> None:
    assert _feed(b": keepalive\n\ndata: x\n\n", b": ka\r\n", b"da", b"ta: y\r\n\r\n") == [
        True,
        False,
        False,
        True,
    ]


def test_a_long_data_line_keeps_alive_in_every_read() -> None:
    assert _feed(b"data: {", b'"a": 1', b"}\n\n", b": ka\n") == [True, True, True, False]
