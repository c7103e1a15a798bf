"""Simulated prefill + decode behind the REAL sglang-router in PD mode."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from servelab.sim.profile import DEFAULT_PROFILE, decode_step_s
from tests.support.http import get_json, metric, post, sse_events
from tests.support.stack import SimStack, sim_stack

KNOB = DEFAULT_PROFILE.knob_name


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    with sim_stack(time_scale=0.05, env={"SERVELAB_SIM_WARMUP_S": "0"}) as st:
        yield st


def chat(prompt: str, **extra: object) -> dict[str, object]:
    return {"model": "sim", "messages": [{"role": "user", "content": prompt}], **extra}


def rooms(base: str) -> dict[int, str]:
    info = get_json(base + "/server_info")["servelab"]
    return {r["room"]: r["first_token"] for r in info["recent_rooms"]}


def test_first_request_is_cold_then_warm() -> None:
    with sim_stack(time_scale=0.05) as fresh:
        before = get_json(fresh.decode_url + "/server_info")["servelab"]
        assert before["warmed_up"] is False and before["requests_served"] == 0
        t0 = time.monotonic()
        status, _ = post(fresh.router_url + "/v1/chat/completions", chat("cold", max_tokens=4))
        cold = time.monotonic() - t0
        t0 = time.monotonic()
        status2, _ = post(fresh.router_url + "/v1/chat/completions", chat("warm", max_tokens=4))
        warm = time.monotonic() - t0
        assert status == status2 == 200
        assert cold >= 17.0 * 0.05 * 0.9 > warm  # the one-time warm-up, scaled
        after = get_json(fresh.decode_url + "/server_info")["servelab"]
        assert after["warmed_up"] is True and after["requests_served"] == 2


def test_non_streaming_chat_starts_with_prefill_token_same_room(stack: SimStack) -> None:
    status, body = post(stack.router_url + "/v1/chat/completions", chat("hello pd", max_tokens=8))
    assert status == 200, body
    data = json.loads(body)
    text = data["choices"][0]["message"]["content"]
    assert data["usage"]["completion_tokens"] == 8
    prefill_rooms, decode_rooms = rooms(stack.prefill_url), rooms(stack.decode_url)
    shared = set(prefill_rooms) & set(decode_rooms)
    assert shared, (prefill_rooms, decode_rooms)
    room = max(shared, key=list(decode_rooms).index)  # the most recent shared room
    assert text.startswith(prefill_rooms[room])


def test_streaming_chat_matches_non_streaming_and_has_usage(stack: SimStack) -> None:
    body = chat("stream me", max_tokens=12, stream=True, stream_options={"include_usage": True})
    status, raw = post(stack.router_url + "/v1/chat/completions", body)
    assert status == 200
    events = sse_events(raw)
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    assert events[-1]["usage"]["completion_tokens"] == 12
    _, plain = post(stack.router_url + "/v1/chat/completions", chat("stream me", max_tokens=12))
    assert text == json.loads(plain)["choices"][0]["message"]["content"]


def test_same_text_at_c1_and_under_concurrency(stack: SimStack) -> None:
    url = stack.router_url + "/v1/chat/completions"
    _, alone = post(url, chat("same", max_tokens=16, seed=7))
    with ThreadPoolExecutor(24) as pool:
        futures = [pool.submit(post, url, chat(f"other {i}", max_tokens=16)) for i in range(23)]
        mine = pool.submit(post, url, chat("same", max_tokens=16, seed=7))
        results = [f.result() for f in futures]
    assert all(s == 200 for s, _ in results)
    text = json.loads(alone)["choices"][0]["message"]["content"]
    assert json.loads(mine.result()[1])["choices"][0]["message"]["content"] == text
    assert len({json.loads(b)["choices"][0]["message"]["content"] for _, b in results}) > 1


def test_completions_and_generate_through_router(stack: SimStack) -> None:
    status, body = post(
        stack.router_url + "/v1/completions", {"model": "sim", "prompt": "a b c", "max_tokens": 5}
    )
    assert status == 200 and json.loads(body)["usage"]["completion_tokens"] == 5
    gen = {"text": "x y", "sampling_params": {"max_new_tokens": 6}}
    status, body = post(stack.router_url + "/generate", gen)
    assert status == 200 and json.loads(body)["meta_info"]["completion_tokens"] == 6


def test_batch_requests_get_one_room_per_item(stack: SimStack) -> None:
    status, body = post(stack.router_url + "/v1/chat/completions", chat("two", max_tokens=3, n=2))
    assert status == 200 and len(json.loads(body)["choices"]) == 2
    prompts = {"model": "sim", "prompt": ["one", "two", "three"], "max_tokens": 3}
    status, body = post(stack.router_url + "/v1/completions", prompts)
    assert status == 200 and len(json.loads(body)["choices"]) == 3
    recent = get_json(stack.decode_url + "/server_info")["servelab"]["recent_rooms"][-5:]
    assert len({r["room"] for r in recent}) == 5
    assert set(rooms(stack.prefill_url)) >= {r["room"] for r in recent}


def test_tool_calls_are_well_formed(stack: SimStack) -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
    calls = 0
    for i in range(6):
        status, body = post(
            stack.router_url + "/v1/chat/completions", chat(f"t{i}", max_tokens=32, tools=tools)
        )
        assert status == 200, body
        message = json.loads(body)["choices"][0]["message"]
        for call in message.get("tool_calls") or []:
            calls += 1
            assert call["function"]["name"] == "lookup"
            json.loads(call["function"]["arguments"])
    assert calls > 0


def test_malformed_request_is_400(stack: SimStack) -> None:
    status, body = post(stack.decode_url + "/v1/chat/completions", None, raw=b"{not json")
    assert status == 400 and "error" in json.loads(body)
    status, body = post(stack.decode_url + "/v1/chat/completions", {"messages": "nope"})
    assert status == 400 and "messages" in json.loads(body)["error"]["message"]
    status, _ = post(stack.router_url + "/v1/chat/completions", chat("x", max_tokens="many"))
    assert 400 <= status < 500
    assert get_json(stack.decode_url + "/server_info")["servelab"]["ready"] is True


def test_info_endpoints_and_metrics(stack: SimStack) -> None:
    info = get_json(stack.decode_url + "/get_server_info")
    assert "model_path" not in info and info["disaggregation_mode"] == "decode"
    assert info["servelab"]["knobs"][KNOB] == 256
    assert get_json(stack.prefill_url + "/model_info")["architectures"]
    assert get_json(stack.decode_url + "/v1/models")["data"][0]["id"] == info["served_model_name"]
    assert {"num_reqs", "num_waiting_reqs"} <= set(get_json(stack.decode_url + "/get_load")[0])
    assert post(stack.decode_url + "/flush_cache", {})[0] == 200
    assert metric(stack.decode_url, "sglang:generation_tokens_total") > 0
    assert metric(stack.prefill_url, "sglang:prompt_tokens_total") > 0
    assert metric(stack.decode_url, "sglang:time_to_first_token_seconds_count") > 0
    assert metric(stack.decode_url, "sglang:num_transfer_failed_reqs_total") == 0


def test_knob_changes_step_time_only_after_restart(stack: SimStack) -> None:
    info = get_json(stack.decode_url + "/server_info")["servelab"]
    assert info["knobs"][KNOB] == 256
    at_256 = decode_step_s(DEFAULT_PROFILE, 64, 64 * 160, 256)
    assert info["step_s"]["64"] == pytest.approx(at_256)
    # The env file / parent env changing does nothing to a running worker ...
    assert get_json(stack.decode_url + "/server_info")["servelab"]["step_s"]["64"] == at_256
    # ... a restart with the new env does.
    stack.restart_workers(decode_env={KNOB: "512"})
    info = get_json(stack.decode_url + "/server_info")["servelab"]
    assert info["knobs"][KNOB] == 512
    assert info["step_s"]["64"] == pytest.approx(decode_step_s(DEFAULT_PROFILE, 64, 64 * 160, 512))
    assert info["step_s"]["64"] < at_256 * 0.95
    status, _ = post(stack.router_url + "/v1/chat/completions", chat("after", max_tokens=4))
    assert status == 200
