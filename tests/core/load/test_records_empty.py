"""An answer that streamed no output token failed ("empty answer": usage counts alone, or
``[DONE]`` alone, are not an answer), and so did one a choice ended with ``finish_reason:
"abort"``; a content, reasoning or tool-call fragment is an answer (issue 38)."""

from __future__ import annotations

import json

import pytest

from servelab.core.load.records import (
    REASON_ABORTED,
    REASON_EMPTY,
    REASON_SERVER_ERROR,
    RequestRecord,
    decode_chunks,
)


def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    return _sse({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


USAGE = _sse({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}})
DONE = b"data: [DONE]\n\n"


def _decoded(*events: bytes) -> RequestRecord:
    reads = [(i, event) for i, event in enumerate(events)]
    return decode_chunks(RequestRecord(index=0, scheduled_ns=0), reads, 99)


@pytest.mark.parametrize(
    "events",
    [
        (DONE,),
        (_chunk({"role": "assistant", "content": ""}), DONE),
        (_chunk({"role": "assistant"}), _chunk({"content": ""}), USAGE, DONE),
        (_sse({"choices": [{"index": 0, "text": ""}]}), DONE),
    ],
    ids=["done-only", "role-only", "usage-only", "empty-text"],
)
def test_no_token_is_an_empty_answer(events: tuple[bytes, ...]) -> None:
    record = _decoded(*events)
    assert (record.error, record.error_detail) == (REASON_EMPTY, "no token streamed")
    assert not record.ok


@pytest.mark.parametrize(
    "delta",
    [
        {"content": "x"},
        {"reasoning_content": "thinking"},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"a"'}}]},
    ],
    ids=["content", "reasoning", "tool-call"],
)
def test_any_output_fragment_is_an_answer(delta: dict[str, object]) -> None:
    record = _decoded(_chunk({"role": "assistant", "content": ""}), _chunk(delta), USAGE, DONE)
    assert record.ok and record.output_tokens == 4


def test_a_completion_text_is_an_answer() -> None:
    assert _decoded(_sse({"choices": [{"index": 0, "text": " w"}]}), DONE).ok


def test_an_aborted_choice_is_a_failure_even_after_tokens() -> None:
    record = _decoded(_chunk({"content": "half"}), _chunk({}, finish="abort"), USAGE, DONE)
    assert record.error == REASON_ABORTED and "abort" in record.error_detail


def test_the_first_reason_wins() -> None:
    record = _decoded(_sse({"error": {"message": "boom"}}), DONE)
    assert record.error == REASON_SERVER_ERROR
