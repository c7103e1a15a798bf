"""The agentic conversation generator, the answer assembler and the correctness checks."""

from __future__ import annotations

import json
from typing import Any

import pytest

import servelab.core.soak.agentic as agentic
from servelab.core.load.sse import Event, SSEDecoder
from servelab.core.soak.agentic import (
    TOOLS,
    Answer,
    AnswerAssembler,
    Conversation,
    Message,
    ToolCall,
    check_answer,
    compare_texts,
    e2e_probe_body,
    greedy_probe_body,
    tool_result,
)
from servelab.core.soak.body import ChatBody


def _chunk(delta: dict[str, object], finish: str | None = None) -> Event:
    data = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return Event(json.dumps(data), 0)


def _sent(body: ChatBody) -> dict[str, Any]:
    """The body as the engine reads it."""
    doc: dict[str, Any] = json.loads(body.encoded())
    return doc


def test_public_api_is_explicit() -> None:
    for name in agentic.__all__:
        assert hasattr(agentic, name), name


def test_same_seed_and_session_give_the_same_conversation() -> None:
    a, b = Conversation(3, seed=7), Conversation(3, seed=7)
    assert a.request_body(model="m", max_tokens=8) == b.request_body(model="m", max_tokens=8)
    other = _sent(Conversation(4, seed=7).request_body(model="m", max_tokens=8))
    assert other["messages"] != _sent(a.request_body(model="m", max_tokens=8))["messages"]
    assert Conversation(3, seed=8).messages != a.messages


def test_every_round_carries_the_whole_conversation_and_the_tools() -> None:
    conv = Conversation(0, seed=0, turn_words=10)
    sizes = []
    for i in range(4):
        sent = conv.request_body(model="m", max_tokens=16)
        body = _sent(sent)
        assert body["tools"] == list(TOOLS)
        assert body["stream"] is True and body["temperature"] == 0
        assert body["messages"][0]["role"] == "system"
        sizes.append(sent.size)
        assert sent.size == len(json.dumps(body).encode())
        conv.add_answer(Answer(f"answer {i}"))
    assert sizes == sorted(sizes) and len(set(sizes)) == 4
    assert conv.round == 4
    roles = [m.role for m in conv.messages]
    assert roles == ["system", "user"] + ["assistant", "user"] * 4


def test_tool_calls_get_synthetic_results_in_the_next_round() -> None:
    conv = Conversation(1, seed=0)
    call = ToolCall(0, "call_1", "read_file", '{"path": "a.py"}')
    conv.add_answer(Answer("", (call,), "tool_calls"))
    assistant, tool = _sent(conv.request_body(model="m", max_tokens=8))["messages"][-2:]
    assert conv.messages[-2:] == [
        Message("assistant", "", (call,)),
        Message("tool", tool["content"], tool_call_id="call_1"),
    ]
    assert list(assistant) == ["role", "content", "tool_calls"]
    assert assistant["tool_calls"] == [{"id": "call_1", "type": "function", "function": {
        "name": "read_file",
        "arguments": '{"path": "a.py"}',
    }}]  # fmt: skip
    assert list(tool) == ["role", "tool_call_id", "content"]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_1"
    assert tool["content"] == tool_result(call, seed=0, words=conv.turn_words)
    assert tool["content"].startswith("[read_file ok] ")


def test_assembler_joins_content_and_tool_call_fragments() -> None:
    asm = AnswerAssembler()
    asm.on_events(
        [
            _chunk({"role": "assistant", "content": ""}),
            _chunk({"content": "Let me "}),
            _chunk({"content": "look."}),
            _chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c0",
                            "type": "function",
                            "function": {"name": "search_code", "arguments": '{"pat'},
                        }
                    ]
                }
            ),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'tern": "x"}'}}]}),
            _chunk({}, "tool_calls"),
            Event("not json", 0),
            Event("[DONE]", 0),
        ]
    )
    answer = asm.answer()
    assert answer.text == "Let me look."
    assert answer.tool_calls == (ToolCall(0, "c0", "search_code", '{"pattern": "x"}'),)
    assert answer.finish_reason == "tool_calls"
    assert check_answer(answer) == []


def test_assembler_works_on_a_real_decoded_stream_split_anywhere() -> None:
    events = [_chunk({"content": w}) for w in ("a", "b", "c")]
    raw = b"".join(b"data: " + e.data.encode() + b"\r\n\r\n" for e in events) + b"data: [DONE]\n\n"
    for cut in (1, 7, len(raw) // 2, len(raw) - 1):
        dec, asm = SSEDecoder(), AnswerAssembler()
        asm.on_events(dec.feed(raw[:cut], 1))
        asm.on_events(dec.feed(raw[cut:], 2))
        assert asm.answer().text == "abc"


@pytest.mark.parametrize(
    ("arguments", "broken"),
    [('{"a": 1}', False), ('{"a": "x"}}', True), ('{"a": "x', True), ("[1, 2]", True)],
)
def test_tool_call_arguments_must_be_a_json_object(arguments: str, broken: bool) -> None:
    violations = check_answer(Answer("", (ToolCall(0, "c", "run_command", arguments),)))
    assert bool(violations) is broken
    if broken:
        assert violations[0].kind == "tool_call_json"
        assert "run_command" in violations[0].detail


def test_compare_texts_names_where_the_texts_differ() -> None:
    assert compare_texts("same text", "same text") is None
    violation = compare_texts("abcdef", "abcXef")
    assert violation is not None and violation.kind == "nondeterministic"
    assert "char 3" in violation.detail
    shorter = compare_texts("abc", "ab")
    assert shorter is not None and "char 2" in shorter.detail


def test_probe_bodies_are_fixed_for_a_seed() -> None:
    assert greedy_probe_body(model="m", max_tokens=8, seed=1) == greedy_probe_body(
        model="m", max_tokens=8, seed=1
    )
    assert greedy_probe_body(model="m", max_tokens=8, seed=1) != greedy_probe_body(
        model="m", max_tokens=8, seed=2
    )
    assert _sent(e2e_probe_body(model="m"))["max_tokens"] == 4


def test_turn_words_must_be_positive() -> None:
    with pytest.raises(ValueError, match="turn_words"):
        Conversation(0, seed=0, turn_words=0)
