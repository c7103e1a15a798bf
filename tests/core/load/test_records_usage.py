"""An engine's ``usage`` is believed only within bounds (issue 38, the ninth pass): a count that
is not a whole number, is negative, passes 64 tokens a content event (completion) or 10^7
(prompt), or is below the content events streamed is not taken; the counted events stand, the
record says ``usage_disagreed``, and such a record round-trips through the ledger's form."""

from __future__ import annotations

import json
from typing import Any

import pytest

from servelab.core.ledger.codec import decode, encode
from servelab.core.load.records import (
    PROMPT_TOKENS_MAX,
    TOKENS_PER_EVENT_MAX,
    RequestRecord,
    decode_chunks,
    usage_count,
)
from servelab.io.ledger.packed import pack_record, unpack_record


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _content(text: str = "w", usage: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {"choices": [{"index": 0, "delta": {"content": text}}]}
    if usage is not None:
        body["usage"] = usage
    return _event(body)


def _decode(*events: bytes, input_tokens: int = 7) -> RequestRecord:
    record = RequestRecord(index=0, scheduled_ns=0, input_tokens=input_tokens)
    reads = [(10 * (i + 1), e) for i, e in enumerate([*events, b"data: [DONE]\n\n"])]
    return decode_chunks(record, reads, 10_000)


def _stream(n: int, usage: dict[str, Any]) -> RequestRecord:
    return _decode(*[_content() for _ in range(n)], _event({"choices": [], "usage": usage}))


@pytest.mark.parametrize(
    "completion", [-5, 10**30, 64 * TOKENS_PER_EVENT_MAX + 1, True, 64.5, "64", [64], 3]
)
def test_an_unbelievable_completion_count_is_not_taken(completion: object) -> None:
    record = _stream(64, {"prompt_tokens": 3, "completion_tokens": completion})
    assert record.ok
    assert (record.output_tokens, record.tokens_from_usage, record.usage_disagreed) == (
        64,
        False,
        True,
    )
    assert record.event_tokens == [1] * 64 and record.input_tokens == 7  # the client's own count


@pytest.mark.parametrize("prompt", [-1, 10**30, PROMPT_TOKENS_MAX + 1, 2.5, False])
def test_an_unbelievable_prompt_count_is_not_taken(prompt: object) -> None:
    record = _stream(4, {"prompt_tokens": prompt, "completion_tokens": 4})
    assert (record.output_tokens, record.input_tokens, record.usage_disagreed) == (4, 7, True)


@pytest.mark.parametrize("completion", [64, 65, 64 * TOKENS_PER_EVENT_MAX])
def test_a_believable_count_is_taken(completion: int) -> None:
    record = _stream(64, {"prompt_tokens": 3, "completion_tokens": completion, "x": None})
    assert (record.output_tokens, record.tokens_from_usage, record.usage_disagreed) == (
        completion, True, False,
    )  # fmt: skip
    assert record.input_tokens == 3


def test_a_null_count_is_not_a_report() -> None:
    record = _stream(3, {"prompt_tokens": None, "completion_tokens": None})
    assert (record.output_tokens, record.tokens_from_usage, record.usage_disagreed) == (
        3,
        False,
        False,
    )


def test_continuous_usage_that_turns_absurd_puts_the_counted_events_back() -> None:
    """vLLM's continuous usage stats shape each event's count; one absurd count undoes them."""
    record = _decode(
        _content(usage={"prompt_tokens": 3, "completion_tokens": 2}),
        _content(usage={"prompt_tokens": 3, "completion_tokens": 4}),
        _content(usage={"prompt_tokens": 3, "completion_tokens": 10**30}),
    )
    assert record.event_tokens == [1, 1, 1]
    assert (record.output_tokens, record.input_tokens, record.usage_disagreed) == (3, 7, True)


def test_continuous_usage_within_bounds_shapes_the_events() -> None:
    record = _decode(
        _content(usage={"prompt_tokens": 3, "completion_tokens": 2}),
        _content(usage={"prompt_tokens": 3, "completion_tokens": 4}),
    )
    assert (record.event_tokens, record.output_tokens, record.usage_disagreed) == ([2, 2], 4, False)


def test_usage_count_bounds() -> None:
    assert [usage_count(v, 10) for v in (0, 10, 11, -1, True, 1.0, None)] == [
        0, 10, None, None, None, None, None,
    ]  # fmt: skip


def test_a_disagreed_record_is_kept_whole_by_the_ledger_form() -> None:
    """Not packed (the compact form has no room for the flag: such a record is stored as JSON),
    and a packed record reads back as not flagged."""
    flagged = _stream(4, {"completion_tokens": -5})
    assert flagged.usage_disagreed and pack_record(encode(flagged)) is None
    believed = _stream(4, {"completion_tokens": 4})
    blob = pack_record(encode(believed))
    assert blob is not None
    assert decode(RequestRecord, unpack_record(blob)) == believed


def test_a_completion_count_above_max_tokens_is_not_taken() -> None:
    """Issue 38, the tenth pass: 10 content events and ``max_tokens`` 16; usage says 600 (within
    64 a content event, above what the request allowed): not believed."""
    events = [*(_content() for _ in range(10)), _event({"choices": [], "usage": {
        "prompt_tokens": 3, "completion_tokens": 600}})]  # fmt: skip
    reads = [(10 * (i + 1), e) for i, e in enumerate([*events, b"data: [DONE]\n\n"])]
    capped = decode_chunks(RequestRecord(0, 0, input_tokens=7), reads, 10_000, max_tokens=16)
    assert (capped.output_tokens, capped.usage_disagreed) == (10, True)
    unknown = decode_chunks(RequestRecord(0, 0, input_tokens=7), reads, 10_000)
    assert (unknown.output_tokens, unknown.usage_disagreed) == (600, False)  # no max_tokens
    events[-1] = _event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 16}})
    reads = [(10 * (i + 1), e) for i, e in enumerate([*events, b"data: [DONE]\n\n"])]
    at_cap = decode_chunks(RequestRecord(0, 0, input_tokens=7), reads, 10_000, max_tokens=16)
    assert (at_cap.output_tokens, at_cap.usage_disagreed) == (16, False)
