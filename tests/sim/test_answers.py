"""The simulated model's answers, pure: schema-valid tool calls, pass-key recall against
``index_topk``, log-probabilities, and what changes answers (batch nondeterminism, the bf16
index keys, wrong KV)."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from servelab.errors import SimError
from servelab.sim.answers import (
    BF16_MIN_BATCH,
    Change,
    bf16_position,
    diverge,
    flip_probability,
    flips,
    perturb_token,
    top_alternatives,
)
from servelab.sim.engineargs import SglangArgs, VllmArgs
from servelab.sim.limits import resolve
from servelab.sim.profile import DEFAULT_PROFILE, steady_throughput
from servelab.sim.protocol import RequestError, parse_request
from servelab.sim.recall import (
    DEFAULT_INDEX_TOPK,
    RECALL_SPAN,
    fail_share,
    find_retrieval,
)
from servelab.sim.settings import load_settings
from servelab.sim.text import Kind, Output, count_tokens, plan_output
from servelab.sim.vllm import VLLM_PROFILE

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 3},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "ratio": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
        "urgent": {"type": "boolean"},
        "where": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            "required": ["lat", "lon"],
        },
    },
    "required": ["city", "unit", "days", "where"],
}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
_TYPES: dict[str, Any] = {
    "string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list,
    "object": dict, "null": type(None),
}  # fmt: skip


def violations(value: Any, schema: dict[str, Any], where: str = "$") -> list[str]:
    """What in ``value`` breaks ``schema`` (the subset the tool schemas here use)."""
    out: list[str] = []
    kind = schema.get("type")
    if kind is not None and (
        not isinstance(value, _TYPES[kind]) or (kind != "boolean" and isinstance(value, bool))
    ):
        return [f"{where}: not {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{where}: not in enum")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < schema.get("minimum", -math.inf) or value > schema.get("maximum", math.inf):
            out.append(f"{where}: out of bounds")
        if value >= schema.get("exclusiveMaximum", math.inf):
            out.append(f"{where}: not below the exclusive maximum")
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        out.append(f"{where}: too short")
    if isinstance(value, list):
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", 10**9):
            out.append(f"{where}: item count")
        for i, item in enumerate(value):
            out += violations(item, schema.get("items", {}), f"{where}[{i}]")
    if isinstance(value, dict):
        out += [f"{where}.{r}: missing" for r in schema.get("required", []) if r not in value]
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                out += violations(value[name], sub, f"{where}.{name}")
    return out


def _tool_args(out: Output) -> Any:
    return json.loads(out.text)


def test_answers_are_fixed_by_seed_and_prompt() -> None:
    out = plan_output(0, "a prompt", 16, greedy=True)
    assert plan_output(0, "a prompt", 16, greedy=True) == out
    assert plan_output(1, "a prompt", 16, greedy=True).text != out.text
    assert plan_output(0, "another prompt", 16, greedy=True).text != out.text
    assert plan_output(0, "a prompt", 16).text == out.text  # the simulator does not sample


def test_greedy_tool_calls_are_valid_for_the_schema_and_deterministic() -> None:
    for i in range(200):
        out = plan_output(0, f"weather {i}", 64, tools=TOOLS, greedy=True)
        assert out.kind is Kind.TOOL and out.tool_name == "get_weather"
        assert out.finish_reason == "tool_calls" and len(out.pieces) <= 64
        assert violations(_tool_args(out), WEATHER) == [], out.text
        assert plan_output(0, f"weather {i}", 64, tools=TOOLS, greedy=True) == out
    few = plan_output(0, "weather", 3, tools=TOOLS, greedy=True)  # grouped into <= 3 pieces
    assert len(few.pieces) <= 3 and violations(_tool_args(few), WEATHER) == []


def test_tool_choice_none_required_and_named_and_sampled_two_in_three() -> None:
    assert plan_output(0, "w", 32, tools=TOOLS, greedy=True, tool_choice="none").kind is Kind.TEXT
    two = [{"type": "function", "function": {"name": n, "parameters": {}}} for n in ("a", "b")]
    named = {"type": "function", "function": {"name": "b"}}
    for i in range(20):
        assert plan_output(0, f"w{i}", 32, tools=two, tool_choice=named).tool_name == "b"
        assert plan_output(0, f"w{i}", 32, tools=two, tool_choice="required").kind is Kind.TOOL
    sampled = [plan_output(0, f"w{i}", 32, tools=two).kind for i in range(300)]
    assert 150 < sampled.count(Kind.TOOL) < 250  # two in three
    after = [plan_output(0, f"w{i}", 32, tools=two, greedy=True, after_tool=True).kind
             for i in range(300)]  # fmt: skip
    assert after == sampled  # greedy after a tool result: words one time in three


def _haystack(n_words: int, depth: float, key: str = "482913") -> str:
    words = [f"w{i % 97}" for i in range(n_words)]
    at = int(n_words * depth)
    return " ".join(words[:at]) + f" The pass key is {key}. " + " ".join(words[at:])


def test_retrieval_answers_the_key_when_recall_holds() -> None:
    prompt = "user: " + _haystack(500, 0.3) + "\nuser: What is the pass key?"
    found = find_retrieval(prompt)
    assert found is not None and found.key == "482913" and 0.25 < found.depth < 0.35
    out = plan_output(0, prompt, 16, greedy=True)
    assert out.kind is Kind.RECALL and out.text == "The pass key is 482913."
    assert out.finish_reason == "stop" and len(out.pieces) == count_tokens(out.text) == 6
    cut = plan_output(0, prompt, 3, greedy=True)
    assert cut.text == "The pass key" and cut.finish_reason == "length"
    assert find_retrieval("The pass key is 123456. no question") is None
    assert find_retrieval("What is the pass key? The pass key is 123456.") is None


def test_recall_drops_above_the_index_topk_span_more_for_early_keys() -> None:
    assert fail_share(RECALL_SPAN * 32, 0.5, 32) == 0.0  # at the span: holds
    assert fail_share(4 * RECALL_SPAN * 32, 0.0, 32) == pytest.approx(0.75)
    assert fail_share(4 * RECALL_SPAN * 32, 1.0, 32) == pytest.approx(0.375)

    def recalled(topk: int, depth: float, n: int = 120) -> int:
        hits = 0
        for i in range(n):
            prompt = f"{i}: " + _haystack(2000, depth) + " What is the pass key?"
            hits += "482913" in plan_output(7, prompt, 8, greedy=True, index_topk=topk).text
        return hits

    assert recalled(DEFAULT_INDEX_TOPK, 0.1) == 120  # the model's own top-k: recall holds
    low_early, low_late = recalled(4, 0.1), recalled(4, 0.9)  # 256 tokens covered of ~2000
    assert low_early < 40 and low_early < low_late < 90  # p_fail ~0.83 early, ~0.48 late


def test_index_topk_comes_from_the_engines_model_override_arguments() -> None:
    sglang = SglangArgs(json_model_override_args='{"index_topk": 64, "other": 1}')
    assert resolve(sglang, DEFAULT_PROFILE, "decode")[1].index_topk == 64
    assert resolve(SglangArgs(), DEFAULT_PROFILE, "decode")[1].index_topk == DEFAULT_INDEX_TOPK
    assert (
        resolve(VllmArgs(hf_overrides='{"index_topk": 8}'), DEFAULT_PROFILE, "decode")[1].index_topk
        == 8
    )
    for bad in ("{", "[1]", '{"index_topk": 0}', '{"index_topk": "x"}'):
        with pytest.raises(SimError):
            resolve(SglangArgs(json_model_override_args=bad), DEFAULT_PROFILE, "decode")


def test_logprobs_chosen_token_is_top1_and_descending() -> None:
    out = plan_output(3, "hello there", 12, greedy=True)
    for k in range(12):
        alts = top_alternatives(out, k, 5)
        assert alts[0][0] == out.pieces[k] and len(alts) == 5
        assert len({t for t, _ in alts}) == 5
        lps = [lp for _, lp in alts]
        assert lps == sorted(lps, reverse=True) and all(lp < 0 for lp in lps)
        assert sum(math.exp(lp) for lp in lps) <= 1.0
        assert top_alternatives(out, k, 5) == alts  # deterministic


def test_a_flip_takes_the_second_choice_and_keeps_the_length() -> None:
    out = plan_output(3, "hello there", 12, greedy=True)
    second = top_alternatives(out, 5, 2)[1][0]
    flipped = diverge(out, 5, Change.FLIP)
    assert flipped.pieces[:5] == out.pieces[:5] and flipped.pieces[5] == second
    assert len(flipped.pieces) == 12 and flipped.finish_reason == out.finish_reason
    alts = top_alternatives(flipped, 5, 3)  # the flipped token is top-1, the old one second
    assert alts[0][0] == second and alts[1][0] == out.pieces[5]
    assert diverge(out, 0, Change.FLIP) == out  # the prefill's token never changes


def test_tool_call_flip_stays_valid_and_garble_breaks_it() -> None:
    changed = 0
    for i in range(60):
        out = plan_output(0, f"weather {i}", 64, tools=TOOLS, greedy=True)
        k = 1 + i % (len(out.pieces) - 1)
        flipped = diverge(out, k, Change.FLIP)
        assert flipped.pieces[:k] == out.pieces[:k] and len(flipped.pieces) == len(out.pieces)
        assert violations(_tool_args(flipped), WEATHER) == [], flipped.text
        changed += flipped.text != out.text
        broken = diverge(out, k, Change.GARBLE)
        assert broken.pieces[:k] == out.pieces[:k] and len(broken.pieces) == len(out.pieces)
        with pytest.raises(ValueError):
            json.loads(broken.text)
    assert changed > 40


def test_recall_answer_garbled_gives_a_wrong_key() -> None:
    prompt = _haystack(100, 0.5) + " What is the pass key?"
    out = plan_output(0, prompt, 16, greedy=True)
    for k in (1, 2, 3, 4):
        wrong = diverge(out, k, Change.GARBLE)
        assert "482913" not in wrong.text and len(wrong.pieces) == 6
        assert wrong.pieces[4].strip().isdigit() and len(wrong.pieces[4].strip()) == 6


def test_flip_rate_grows_with_the_batch() -> None:
    assert flip_probability(0.1, 64) == pytest.approx(0.1)
    assert flip_probability(0.1, 8) == pytest.approx(0.0125)
    roots = [random.Random(i).getrandbits(64) for i in range(4000)]

    def share(batch: int) -> float:
        return sum(flips(r, 3, batch, 0.1) for r in roots) / len(roots)

    assert share(1) < share(16) < share(64) < share(128)
    assert share(64) == pytest.approx(0.1, abs=0.02)
    assert not any(flips(r, 3, 64, 0.0) for r in roots)
    assert [flips(r, 3, 64, 0.1) for r in roots] == [flips(r, 3, 64, 0.1) for r in roots]


def test_bf16_alters_one_answer_in_three_only_above_16() -> None:
    outs = [plan_output(0, f"probe {i}", 24, greedy=True) for i in range(600)]

    def altered(batch: int) -> int:
        n = 0
        for out in outs:
            now = out
            for k in range(1, 24):
                now = perturb_token(now, k, batch, 0.0, True)
            n += now.pieces != out.pieces
        return n

    assert altered(BF16_MIN_BATCH) == 0
    assert 160 < altered(BF16_MIN_BATCH + 1) < 240  # one in three
    assert altered(64) == sum(bf16_position(o.root) is not None for o in outs)


def test_bf16_index_keys_are_faster_in_the_model() -> None:
    base = steady_throughput(DEFAULT_PROFILE, 64, 256, 128, 64)
    bf16 = steady_throughput(DEFAULT_PROFILE, 64, 256, 128, 64, index_keys_bf16=True)
    assert 1.08 <= bf16 / base <= 1.13


def test_the_bf16_knob_is_read_at_start_up_under_each_engines_name() -> None:
    on = load_settings("decode", env={"SGLANG_NSA_INDEX_KEYS_BF16": "1"})
    assert on.index_keys_bf16 and on.knobs()["SGLANG_NSA_INDEX_KEYS_BF16"] == 1
    assert not load_settings("decode", env={}).index_keys_bf16
    vllm = load_settings("decode", env={"VLLM_NSA_INDEX_KEYS_BF16": "1"}, profile=VLLM_PROFILE)
    assert vllm.index_keys_bf16
    assert on.decode_step_s(64, 64 * 160) < load_settings("decode", env={}).decode_step_s(
        64, 64 * 160
    )
    with pytest.raises(SimError):
        load_settings("decode", env={"SGLANG_NSA_INDEX_KEYS_BF16": "maybe"})


def test_request_parsing_of_temperature_and_logprobs() -> None:
    def chat(**extra: Any) -> Any:
        body = {"messages": [{"role": "user", "content": "hi"}], **extra}
        return parse_request("chat", body, "m")

    req = chat(temperature=0, logprobs=True, top_logprobs=3, tool_choice="required")
    assert not isinstance(req, RequestError)
    assert req.greedy and req.logprobs == 3 and req.tool_choice == "required"
    plain = chat()
    assert not isinstance(plain, RequestError) and not plain.greedy and plain.logprobs is None
    assert not plain.after_tool
    turns = [{"role": "user", "content": "hi"}, {"role": "tool", "content": "42"}]
    tooled = parse_request("chat", {"messages": turns}, "m")
    assert not isinstance(tooled, RequestError) and tooled.after_tool
    on = chat(logprobs=True)
    assert not isinstance(on, RequestError) and on.logprobs == 0
    completions = parse_request("completions", {"prompt": "x", "logprobs": 2}, "m")
    assert not isinstance(completions, RequestError) and completions.logprobs == 2
    for bad in ({"top_logprobs": 2}, {"logprobs": "yes"}, {"logprobs": True, "top_logprobs": 21},
                {"temperature": -1}, {"temperature": "hot"}):  # fmt: skip
        assert isinstance(chat(**bad), RequestError), bad
