"""The simulator's answers on the wire, through the real routers: greedy answers the same at C1
and under load, log-probabilities in the engines' shapes, schema-valid tool calls, recall
against ``index_topk``, and what alters answers with HTTP 200 (batch nondeterminism, the bf16
index keys, wrong KV after the hand-off)."""

from __future__ import annotations

import contextlib
import http.client
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from servelab.sim.text import plan_output
from tests.contracts.stacks import Pd, pd_stack
from tests.sim.test_answers import TOOLS, WEATHER, violations
from tests.support.http import get_json, metric, post, set_faults, sse_events
from tests.support.stack import SimStack, sim_stack

KEY = "482913"


def chat(content: str, max_tokens: int = 16, **extra: Any) -> dict[str, Any]:
    body = {"model": "m", "messages": [{"role": "user", "content": content}], "temperature": 0}
    return {**body, "max_tokens": max_tokens, **extra}


def retrieval(i: int, words: int = 300, depth: float = 0.4) -> str:
    filler = [f"w{(i + j) % 89}" for j in range(words)]
    at = int(words * depth)
    text = " ".join(filler[:at]) + f" The pass key is {KEY}. " + " ".join(filler[at:])
    return f"{i}: {text} What is the pass key?"


PROMPTS = [chat(f"plain prompt {i}") for i in range(8)]
PROMPTS += [chat(f"tool prompt {i}", 64, tools=TOOLS) for i in range(4)]
PROMPTS += [chat(retrieval(i)) for i in range(4)]


def answer(url: str, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The answer's text (a tool call: its arguments) and usage, streamed or not; asserts 200 and,
    for a stream, a valid SSE body ending in [DONE]."""
    status, raw = post(url + "/v1/chat/completions", body, timeout=60)
    assert status == 200, raw
    if not body.get("stream"):
        doc = json.loads(raw)
        message = doc["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        return (calls[0]["function"]["arguments"] if calls else message["content"]), doc["usage"]
    assert raw.rstrip().endswith(b"data: [DONE]")
    parts: list[str] = []
    usage: dict[str, Any] = {}
    for event in sse_events(raw):
        assert "error" not in event, event
        usage = event.get("usage") or usage
        for choice in event["choices"]:
            delta = choice.get("delta", {})
            parts.append(delta.get("content") or "")
            for call in delta.get("tool_calls") or []:
                parts.append(call["function"].get("arguments", ""))
    return "".join(parts), usage


def answers(url: str, bodies: list[dict[str, Any]], concurrency: int) -> list[str]:
    with ThreadPoolExecutor(concurrency) as pool:
        return [text for text, _ in pool.map(lambda b: answer(url, b), bodies)]


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    with sim_stack(time_scale=0.05, env={"SERVELAB_SIM_WARMUP_S": "0"}) as st:
        yield st


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pd]:
    env = {"SERVELAB_SIM_WARMUP_S": "0"}
    with pd_stack("vllm", tmp_path_factory.mktemp("vllm"), worker_args=["--admin"], env=env) as pd:
        yield pd


def _stack(engine: str, request: pytest.FixtureRequest) -> SimStack | Pd:
    """The module's stack of ``engine`` (started the first time a test asks for it)."""
    return request.getfixturevalue("stack" if engine == "sglang" else "vllm")  # type: ignore[no-any-return]


@pytest.fixture(params=["sglang", "vllm"])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_greedy_answers_are_the_same_at_c1_and_under_load(
    engine: str, request: pytest.FixtureRequest
) -> None:
    router = _stack(engine, request).router_url
    alone = answers(router, PROMPTS, 1)
    loaded = answers(router, [{**b, "stream": True} for b in PROMPTS] * 2, 16)
    assert loaded == alone * 2
    for text in alone[8:12]:
        assert violations(json.loads(text), WEATHER) == [], text
    assert all(text == f"The pass key is {KEY}." for text in alone[12:])


def _check_chat_logprobs(content: list[dict[str, Any]], pieces: list[str], k: int) -> None:
    assert [e["token"] for e in content] == pieces
    for entry in content:
        assert set(entry) == {"token", "logprob", "bytes", "top_logprobs"}
        assert entry["bytes"] == list(entry["token"].encode()) and entry["logprob"] < 0
        tops = entry["top_logprobs"]
        assert len(tops) == k and tops[0]["token"] == entry["token"]  # greedy: top-1
        assert tops[0]["logprob"] == entry["logprob"]
        assert [t["logprob"] for t in tops] == sorted((t["logprob"] for t in tops), reverse=True)
        assert all(set(t) == {"token", "logprob", "bytes"} for t in tops)


def test_logprobs_in_the_engines_shape(engine: str, request: pytest.FixtureRequest) -> None:
    url = _stack(engine, request).router_url
    body = chat("logprobs please", 6, logprobs=True, top_logprobs=3)
    status, raw = post(url + "/v1/chat/completions", body)
    assert status == 200
    choice = json.loads(raw)["choices"][0]
    pieces_seen = [e["token"] for e in choice["logprobs"]["content"]]
    assert "".join(pieces_seen) == choice["message"]["content"]
    _check_chat_logprobs(choice["logprobs"]["content"], pieces_seen, 3)
    status, raw = post(url + "/v1/chat/completions", {**body, "stream": True})
    streamed = []
    for event in sse_events(raw):
        for ch in event["choices"]:
            if ch.get("delta", {}).get("content"):
                assert len(ch["logprobs"]["content"]) == 1  # each chunk carries its own token
                streamed += ch["logprobs"]["content"]
    _check_chat_logprobs(streamed, pieces_seen, 3)
    comp = {"model": "m", "prompt": "logprobs please", "max_tokens": 5, "logprobs": 2}
    status, raw = post(url + "/v1/completions", {**comp, "temperature": 0})
    assert status == 200
    lp = json.loads(raw)["choices"][0]["logprobs"]
    assert set(lp) == {"text_offset", "token_logprobs", "tokens", "top_logprobs"}
    assert len(lp["tokens"]) == 5 and all(len(t) == 2 for t in lp["top_logprobs"])
    assert lp["text_offset"][0] == 0 and lp["text_offset"][1] == len(lp["tokens"][0])
    for top, token in zip(lp["top_logprobs"], lp["tokens"], strict=True):
        assert max(top, key=top.__getitem__) == token  # greedy: the chosen token is top-1
    status, raw = post(url + "/v1/chat/completions", chat("x", top_logprobs=2))
    assert status == 400  # top_logprobs without logprobs


def test_kv_corrupt_changes_answers_with_http_200(
    engine: str, request: pytest.FixtureRequest
) -> None:
    target = _stack(engine, request)
    router, decode = target.router_url, target.decode_url
    bodies = [{**b, "stream": True, "stream_options": {"include_usage": True}} for b in PROMPTS]
    clean = [answer(router, b) for b in bodies]
    set_faults(decode, kv_corrupt=True)
    try:
        wrong = [answer(router, b) for b in bodies]
        direct = answer(decode, PROMPTS[0])[0]  # no hand-off: nothing to corrupt
    finally:
        set_faults(decode, kv_corrupt=False)
    assert all(w[0] != c[0] for w, c in zip(wrong, clean, strict=True))
    assert [w[1] for w in wrong] == [c[1] for c in clean]  # usage unchanged
    assert direct == answer(decode, PROMPTS[0])[0]
    for text in [w[0] for w in wrong][8:12]:
        with pytest.raises(ValueError):
            json.loads(text)
    assert not any(KEY in w[0] for w in wrong[12:])
    assert [answer(router, b) for b in bodies] == clean  # switched off: clean again


@contextlib.contextmanager
def held_streams(base: str, n: int) -> Iterator[None]:
    """``n`` long streams straight to the decode ``base``, nobody reading them, until all run
    (bounded: 60 s); long enough to outlast the test (20,000 tokens, about 30 s at time scale
    0.05), closed on exit (the decode then drops them)."""
    port = int(base.rsplit(":", 1)[1])
    body = json.dumps(chat("hold", 20_000, stream=True, temperature=1)).encode()
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=60) for _ in range(n)]
    try:
        for conn in conns:
            conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        deadline = time.monotonic() + 60
        while metric(base, "sglang:num_running_reqs") < n:
            assert time.monotonic() < deadline, "the held streams never all ran"
            time.sleep(0.05)
        yield
    finally:
        for conn in conns:
            conn.close()


def test_batch_nondeterminism_flips_more_in_a_bigger_batch(stack: SimStack) -> None:
    bodies = [chat(f"flip {i}", 32) for i in range(16)]
    clean = answers(stack.router_url, bodies, 1)
    set_faults(stack.decode_url, batch_nondeterminism=0.5)
    try:
        alone = answers(stack.router_url, bodies, 1)  # batch 1: 0.8% a token
        with held_streams(stack.decode_url, 31):
            crowded = answers(stack.router_url, bodies, 1)  # batch 32: 25% a token
        sampled = answer(stack.router_url, {**bodies[0], "temperature": 1})[0]
    finally:
        set_faults(stack.decode_url, batch_nondeterminism=0.0)
    differ_alone = sum(a != c for a, c in zip(alone, clean, strict=True))
    differ_crowded = sum(a != c for a, c in zip(crowded, clean, strict=True))
    assert differ_alone <= 8 and differ_crowded >= 14, (differ_alone, differ_crowded)
    assert sampled == answer(stack.router_url, {**bodies[0], "temperature": 1})[0]  # greedy only


@pytest.fixture(scope="module")
def bf16(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimStack]:
    env = {"SERVELAB_SIM_WARMUP_S": "0"}
    args = ["--json-model-override-args", '{"index_topk": 4}']
    decode_env = {"SGLANG_NSA_INDEX_KEYS_BF16": "1"}
    with sim_stack(time_scale=0.05, env=env, decode_env=decode_env, decode_args=args) as st:
        yield st


def test_bf16_index_keys_alter_a_third_of_answers_above_16_and_are_faster(
    bf16: SimStack, stack: SimStack
) -> None:
    bodies = [chat(f"bf16 {i}", 24) for i in range(24)]
    tools = [chat(f"bf16 tool {i}", 64, tools=TOOLS) for i in range(12)]
    expected = [plan_output(0, f"user: bf16 {i}", 24, greedy=True).text for i in range(24)]
    assert answers(bf16.router_url, bodies, 1) == expected  # batch 1: unaltered
    with held_streams(bf16.decode_url, 20):
        altered = answers(bf16.router_url, bodies + tools, 1)
    differ = sum(a != e for a, e in zip(altered, expected, strict=False))
    assert 3 <= differ <= 14, differ  # one in three, by prompt
    broken = 0
    for text in altered[24:]:
        try:
            broken += violations(json.loads(text), WEATHER) != []
        except ValueError:
            broken += 1
    assert 1 <= broken <= 8, broken
    info = get_json(bf16.decode_url + "/server_info")["servelab"]
    plain = get_json(stack.decode_url + "/server_info")["servelab"]
    assert info["knobs"]["SGLANG_NSA_INDEX_KEYS_BF16"] == 1
    assert plain["knobs"]["SGLANG_NSA_INDEX_KEYS_BF16"] == 0
    assert 1.08 <= plain["step_s"]["64"] / info["step_s"]["64"] <= 1.2


def test_recall_fails_below_the_index_topk_and_holds_by_default(
    bf16: SimStack, stack: SimStack
) -> None:
    bodies = [chat(retrieval(i, 2000, 0.2), 8) for i in range(20)]
    low = answers(bf16.router_url, bodies, 4)  # index_topk 4: 256 tokens covered of ~2000
    default = answers(stack.router_url, bodies, 4)
    assert all(text == f"The pass key is {KEY}." for text in default)
    wrong = [t for t in low if KEY not in t]
    assert len(wrong) >= 10 and all(t.startswith("The pass key is ") for t in wrong)
    assert low == answers(bf16.router_url, bodies, 1)  # deterministic
