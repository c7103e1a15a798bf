"""A soak request body sends the bytes the JSON object it replaced sent: every body the soak
builds, and every change the replay matrix makes to one, compared byte for byte with the dict
code that did it before (written out here as it was), for both key orders the soak sends (its
agentic rounds, an answer probe's)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from servelab.core.answers.probes import probe_body, probe_set
from servelab.core.soak.agentic import (
    TOOLS,
    Answer,
    Conversation,
    Message,
    ToolCall,
    e2e_probe_body,
    greedy_probe_body,
)
from servelab.core.soak.body import ChatBody
from servelab.core.soak.replay import Payload, varied

MARKER = "[replay 00000000002a] "
REMOTE = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
          "remote_block_ids": None, "remote_host": None, "remote_port": None}  # fmt: skip


def _bytes(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode()


# -- the dict code the soak ran before, as it was ----------------------------------------------
def _old_message(m: Message) -> dict[str, Any]:
    """A message as the conversation held it, a dict per role."""
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    message: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls
        ]
    return message


def _old_request_body(conv: Conversation, model: str, max_tokens: int) -> dict[str, Any]:
    return {"model": model, "messages": [_old_message(m) for m in conv.messages],
            "tools": [dict(t) for t in TOOLS], "tool_choice": "auto", "max_tokens": max_tokens,
            "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip


def _old_uncached(body: dict[str, Any]) -> dict[str, Any]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return dict(body)
    last = dict(messages[-1])
    content = last.get("content")
    if isinstance(content, str):
        last["content"] = MARKER + content
    elif isinstance(content, list):
        last["content"] = [{"type": "text", "text": MARKER}, *content]
    else:
        return dict(body)
    return {**body, "messages": [*messages[:-1], last]}


def _old_body(body: dict[str, Any], stream: bool) -> dict[str, Any]:
    out = _old_uncached(body)
    out["stream"] = stream
    if not stream:
        out.pop("stream_options", None)
    return out


def _old_varied(failing: dict[str, Any], minimal: dict[str, Any], payload: Payload) -> Any:
    if payload == Payload.SMALL_PROMPT:
        small = {k: v for k, v in failing.items() if k not in ("tools", "tool_choice")}
        return small | {"messages": list(minimal["messages"])}
    if payload == Payload.SHORT_ANSWER:
        return failing | {"max_tokens": 1}
    return failing


def _old_shrink(body: dict[str, Any], limit: int) -> dict[str, Any]:
    messages = [dict(m) for m in body.get("messages", [])]
    system = [m for m in messages if m.get("role") == "system"]
    turns = [m for m in messages if m.get("role") != "system"]
    out = dict(body)
    while len(turns) > 1 and len(_bytes(out | {"messages": system + turns})) > limit:
        turns.pop(0)
        while len(turns) > 1 and turns[0].get("role") in ("tool", "assistant"):
            turns.pop(0)
    out["messages"] = system + turns
    last = turns[-1] if turns else None
    if last is not None and isinstance(last.get("content"), str):
        excess = len(_bytes(out)) - limit
        if excess > 0:
            last["content"] = last["content"][: max(1, len(last["content"]) - excess)]
    return out


def _old_prefill_leg(body: dict[str, Any]) -> dict[str, Any]:
    leg = {**body, "max_tokens": 1, "min_tokens": 1, "stream": False,
           "kv_transfer_params": REMOTE}  # fmt: skip
    leg.pop("stream_options", None)
    if "max_completion_tokens" in leg:
        leg["max_completion_tokens"] = 1
    return leg


# -- the bodies ----------------------------------------------------------------------------------
def _conversation() -> Conversation:
    conv = Conversation(2, seed=5, turn_words=40)
    conv.add_answer(Answer("looking", (ToolCall(0, "c0", "read_file", '{"path": "a.py"}'),)))
    conv.add_answer(Answer("done"))
    return conv


def _pairs() -> list[tuple[ChatBody, dict[str, Any]]]:
    """Each body the soak builds, with the dict it built before."""
    conv = _conversation()
    probe = probe_set(0, 2, 4096)[1]  # the tool-call probe: its own key order
    greedy = greedy_probe_body(model="m", max_tokens=8, seed=3)
    return [
        (conv.request_body(model="m", max_tokens=64), _old_request_body(conv, "m", 64)),
        (greedy, json.loads(greedy.encoded())),
        (e2e_probe_body(model="m"), {"model": "m", "messages": [{"role": "user", "content":
         "servelab soak e2e probe"}], "max_tokens": 4, "temperature": 0, "stream": True}),
        (ChatBody.decoded(probe_body(probe, "m")), json.loads(probe_body(probe, "m"))),
    ]  # fmt: skip


def test_the_soaks_bodies_send_what_their_dicts_sent() -> None:
    conv = _conversation()
    body = conv.request_body(model="m", max_tokens=64)
    assert body.encoded() == _bytes(_old_request_body(conv, "m", 64))
    assert body.size == len(_bytes(_old_request_body(conv, "m", 64))) and body.stream
    greedy = greedy_probe_body(model="m", max_tokens=8, seed=3)
    assert list(json.loads(greedy.encoded())) == [
        "model",
        "messages",
        "max_tokens",
        "temperature",
        "stream",
        "stream_options",
    ]
    probe = probe_set(0, 2, 4096)[1]
    assert ChatBody.decoded(probe_body(probe, "m")).encoded() == probe_body(probe, "m")
    assert e2e_probe_body(model="m").encoded() == _bytes(_pairs()[2][1])
    with pytest.raises(ValueError, match="object"):
        ChatBody.decoded(b"[1, 2]")


@pytest.mark.parametrize("index", range(4), ids=["agentic", "greedy", "e2e", "answer_probe"])
def test_every_change_the_replay_makes_sends_what_the_dict_code_sent(index: int) -> None:
    body, doc = _pairs()[index]
    assert body.encoded() == _bytes(doc)
    for stream in (True, False):
        sent, old = body.uncached(MARKER).streamed(stream), _old_body(doc, stream)
        assert sent.encoded() == _bytes(old) and sent.size == len(_bytes(old))
        assert sent.stream is stream
        pair = sent.with_fields(bootstrap_host="127.0.0.1", bootstrap_port=8998,
                                bootstrap_room=7)  # fmt: skip
        old_pair = old | {"bootstrap_host": "127.0.0.1", "bootstrap_port": 8998,
                          "bootstrap_room": 7}  # fmt: skip
        assert pair.encoded() == _bytes(old_pair) and pair.size == len(_bytes(old_pair))
        assert sent.prefill_leg(REMOTE).encoded() == _bytes(_old_prefill_leg(old))
        params = {"remote_block_ids": [1, 2], "remote_engine_id": "e"}
        decode_leg = sent.with_fields(kv_transfer_params=params)
        assert decode_leg.encoded() == _bytes({**old, "kv_transfer_params": params})
    minimal = e2e_probe_body(model="m")
    old_minimal = json.loads(minimal.encoded())
    for payload in Payload:
        got = varied(body, minimal, payload)
        assert got.encoded() == _bytes(_old_varied(doc, old_minimal, payload)), payload
    for limit in (200, 1200, 2500, body.size, body.size * 2):
        assert body.shrunk(limit).encoded() == _bytes(_old_shrink(doc, limit)), limit
    assert body.expected_tokens == doc["max_tokens"]
    assert body == ChatBody.decoded(body.encoded()) and body != body.with_fields(max_tokens=1)
