"""An answer read from its streamed bytes and checked: differs, structural failures, recall,
top-1 agreement; and the arm's summary keeps a differing answer beside its reference."""

from __future__ import annotations

import json
from typing import Any

from servelab.core.answers.answer import Answer, Failure, check_answer, read_answer
from servelab.core.answers.contract import summarize_arm
from servelab.core.answers.probes import probe_set
from servelab.core.answers.schema import schema_errors

PLAIN, TOOL, RETRIEVAL = probe_set(0, 3, 32768)


def _sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + (
        b"data: [DONE]\n\n"
    )


def _logprobs(token: str) -> dict[str, Any]:
    top = [{"token": token, "logprob": -0.1}, {"token": "x", "logprob": -3}]
    return {"content": [{"token": token, "logprob": -0.1, "top_logprobs": top}]}


def _text(pieces: list[str], finish: str = "length", tokens: int | None = None) -> bytes:
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None,
                      "logprobs": _logprobs(p)}]}
        for p in pieces
    ]  # fmt: skip
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append({"choices": [], "usage": {"completion_tokens": tokens or len(pieces)}})
    return _sse(*chunks)


def _tool(arguments: str) -> bytes:
    fn = {"name": "search_flights", "arguments": arguments}
    return _sse(
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": fn}]},
                      "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"completion_tokens": 9}},
    )  # fmt: skip


def test_a_streamed_answer_is_read_whole() -> None:
    answer = read_answer(0, _text(["The", " sky"], tokens=24), level=64)
    assert answer.text == "The sky" and answer.finish_reason == "length" and answer.tokens == 24
    assert answer.top1 == ("The", " sky") and answer.utf8 and answer.level == 64
    tool = read_answer(1, _tool('{"origin": "a", "destination": "b"}'))
    assert tool.tool_name == "search_flights" and tool.finish_reason == "tool_calls"


def test_the_same_answer_passes_and_a_different_one_differs() -> None:
    ref = read_answer(0, _text(["a"] * 24))
    same = check_answer(PLAIN, read_answer(0, _text(["a"] * 24), level=8), ref)
    assert not same.differs and not same.failures and not same.wrong and same.top1_agree == 1.0
    other = check_answer(PLAIN, read_answer(0, _text(["b"] * 24), level=8), ref)
    assert other.differs and other.wrong and other.top1_agree == 0.0 and other.text


def test_structural_failures_are_named() -> None:
    ref = read_answer(1, _tool('{"origin": "a", "destination": "b"}'))
    broken = check_answer(TOOL, read_answer(1, _tool('{"origin": "a", "destin')), ref)
    assert broken.failures == (Failure.TOOL_JSON,) and broken.wrong
    schema = check_answer(TOOL, read_answer(1, _tool('{"origin": 1}')), ref)
    assert schema.failures == (Failure.TOOL_SCHEMA,)
    short = check_answer(PLAIN, read_answer(0, _text(["a"], finish="length", tokens=3)), None)
    assert Failure.FINISH in short.failures  # "length" below max_tokens
    empty = check_answer(PLAIN, read_answer(0, _text([], finish="stop", tokens=0)), None)
    assert Failure.EMPTY in empty.failures
    mangled = check_answer(PLAIN, read_answer(0, _text(["a\ufffd"] * 24)), None)
    assert Failure.UTF8 in mangled.failures
    bad_bytes = read_answer(0, b'data: {"choices":[{"delta":{"content":"\xff"}}]}\n\n')
    assert not bad_bytes.utf8
    failed = check_answer(PLAIN, Answer(0, "", error="http 500"), None)
    assert failed.failures == (Failure.REQUEST,)


def test_retrieval_is_judged_by_its_key_not_the_reference() -> None:
    assert RETRIEVAL.key is not None
    good = read_answer(2, _text(["The pass key is ", RETRIEVAL.key, "."], "stop"))
    lost = read_answer(2, _text(["The pass key is ", "000000", "."], "stop"))
    assert check_answer(RETRIEVAL, good, lost).recalled is True
    assert not check_answer(RETRIEVAL, good, lost).wrong  # differs, but right
    assert check_answer(RETRIEVAL, lost, good).wrong


def test_the_schema_subset() -> None:
    schema = TOOL.tool[2] if TOOL.tool else {}
    assert schema_errors({"origin": "a", "destination": "b", "passengers": 2}, schema) == []
    assert schema_errors({"origin": "a"}, schema) == ["$.destination: missing"]
    assert schema_errors({"origin": "a", "destination": "b", "x": 1}, schema) == [
        "$.x: not allowed"
    ]
    assert schema_errors({"origin": "a", "destination": "b", "passengers": True}, schema)
    assert schema_errors({"unit": "kelvin"}, {"properties": {"unit": {"enum": ["celsius"]}}})


def test_an_arm_summary_keeps_a_wrong_answer_beside_its_reference() -> None:
    ref = read_answer(0, _text(["a"] * 24))
    checks = [check_answer(PLAIN, read_answer(0, _text(["<b>"] * 24), level=64), ref),
              check_answer(PLAIN, read_answer(0, _text(["a"] * 24), level=64), ref)]  # fmt: skip
    arm = summarize_arm("1", checks, {0: ref})
    assert (arm.answers, arm.differ, arm.wrong) == (2, 1, 1)
    (example,) = arm.examples
    assert example.answer.startswith("<b>") and example.reference == "a" * 24


def test_a_chunk_field_of_the_wrong_shape_makes_the_stream_malformed() -> None:
    """Each chunk is read once as its typed fields: a field of the wrong shape is a malformed
    stream (a request failure), not a field passed over."""
    good = read_answer(PLAIN.id, _text(["a", "b"]))
    assert good.error is None and good.text == "ab"
    bad = _sse({"choices": [{"index": 0, "delta": {"content": ["a"]}}]})
    assert read_answer(PLAIN.id, bad).error == "malformed stream"
    bad = _sse({"choices": [{"delta": {"content": "a"}}], "usage": {"completion_tokens": "many"}})
    assert read_answer(PLAIN.id, bad).error == "malformed stream"
