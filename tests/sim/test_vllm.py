"""The simulated vLLM workers behind the real vllm-router 0.1.17: the NIXL flow, end to end.

Pure parts first (the block store, the params, the metric names), then a real stack: a streaming
chat through the router, both legs with one X-Request-Id, and a decode leg that names blocks the
prefill does not hold failing as vLLM's does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from servelab.core.engines import VLLM_KNOB, canonical_metrics
from servelab.core.soak.evidence import parse_metrics
from servelab.sim.metrics import WorkerMetrics
from servelab.sim.nixl import BlockStore, KvItem, NixlError, remote_prefill, transfer_params
from servelab.sim.vllm import ENV_DEV_MODE, VLLM_PROFILE, render_metrics
from tests.support.http import get_json, metric, post, sse_events
from tests.support.vllmstack import VllmStack, vllm_stack

CHAT = "/v1/chat/completions"


def _chat(max_tokens: int = 8, stream: bool = True, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "servelab-sim",
        "messages": [{"role": "user", "content": "say something about caches"}],
        "max_tokens": max_tokens,
        "stream": stream,
        "stream_options": {"include_usage": True},
    }
    return {**body, **extra}


# ------------------------------------------------------------------------------------------ pure
def test_the_block_store_hands_blocks_over_once_to_the_engine_that_holds_them() -> None:
    store = BlockStore("engine-a", hold_s=10.0)
    held = store.hold("cmpl-1", (KvItem("Hi", 40),), now=0.0)
    assert held.block_ids == (0, 1, 2)  # ceil(40 / 16) blocks
    assert isinstance(store.read("engine-b", "cmpl-1", held.block_ids, 1.0), NixlError)
    assert store.read("engine-a", "cmpl-1", (9,), 1.0) == NixlError(
        "block_ids", "block ids do not match request 'cmpl-1'"
    )
    assert store.read("engine-a", "cmpl-1", held.block_ids, 1.0) == held
    again = store.read("engine-a", "cmpl-1", held.block_ids, 1.0)
    assert isinstance(again, NixlError) and again.reason == "not_held"  # freed once read
    store.hold("cmpl-2", (KvItem("Hi", 1),), now=0.0)
    late = store.read("engine-a", "cmpl-2", (3,), 11.0)  # the abort timeout freed it
    assert isinstance(late, NixlError) and late.reason == "not_held" and len(store) == 0


def test_the_prefill_answer_carries_the_nixl_fields() -> None:
    held = BlockStore("e", 1.0).hold("cmpl-x", (KvItem("a", 3),), now=0.0)
    params = transfer_params(held, "127.0.0.1", 5600)
    assert params == {
        "do_remote_prefill": True,
        "do_remote_decode": False,
        "remote_block_ids": [0],
        "remote_engine_id": "e",
        "remote_request_id": "cmpl-x",
        "remote_host": "127.0.0.1",
        "remote_port": 5600,
        "tp_size": 1,
    }
    assert remote_prefill(params) and not remote_prefill({"do_remote_decode": True})


def test_metrics_have_vllm_names_with_engine_0_and_map_onto_the_rules_names() -> None:
    m = WorkerMetrics(model="m", running=2, queued=1, generation_tokens=7, transfer_failed=1)
    text = render_metrics(m, served=3)
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines and all(line.startswith("vllm:") and 'engine="0"' in line for line in lines)
    values = canonical_metrics(parse_metrics(text))
    assert values["sglang:num_running_reqs"] == 2 and values["sglang:num_queue_reqs"] == 1
    assert values["sglang:generation_tokens_total"] == 7
    assert values["sglang:num_transfer_failed_reqs_total"] == 1
    assert values["sglang:num_requests_total"] == 3  # finished (length + abort)
    assert VLLM_PROFILE.knob_name == VLLM_KNOB


# ------------------------------------------------------------------------------------ real stack
@pytest.fixture(scope="module")
def stack() -> Iterator[VllmStack]:
    with vllm_stack(decode_env={VLLM_KNOB: "512"}, env={ENV_DEV_MODE: "1"}) as st:
        yield st


def test_a_streaming_chat_goes_through_the_real_vllm_router(stack: VllmStack) -> None:
    status, body = post(stack.router_url + CHAT, _chat(max_tokens=8), timeout=60)
    assert status == 200, body
    events = sse_events(body)
    text = "".join(c["delta"].get("content") or "" for e in events for c in e["choices"])
    assert text and body.rstrip().endswith(b"data: [DONE]")
    usage = [e["usage"] for e in events if e.get("usage")]
    assert usage and usage[-1]["completion_tokens"] == 8 and usage[-1]["prompt_tokens"] > 0
    legs = {}
    for role, url in (("prefill", stack.prefill_url), ("decode", stack.decode_url)):
        recent = get_json(url + "/server_info")["servelab"]["recent_requests"]
        legs[role] = recent[-1]
    assert legs["prefill"]["status"] == legs["decode"]["status"] == 200
    x_id = legs["prefill"]["x_request_id"]
    assert x_id == legs["decode"]["x_request_id"] and x_id.startswith("___prefill_addr_")
    log = (stack.log_dir / "decode.log").read_text()
    assert f"X-Request-Id={x_id}" in log and f"{VLLM_KNOB}=512" in log
    info = get_json(stack.decode_url + "/server_info")
    assert info["servelab"]["knobs"][VLLM_KNOB] == 512
    assert info["vllm_config"].count("kv_role='kv_consumer'") == 1
    config = get_json(stack.decode_url + "/server_info?config_format=json")["vllm_config"]
    assert config["kv_transfer_config"]["kv_role"] == "kv_consumer"
    assert info["vllm_env"][ENV_DEV_MODE] == "1"


def _prefill_leg(stack: VllmStack) -> dict[str, Any]:
    leg = _chat(max_tokens=1, stream=False, kv_transfer_params={"do_remote_decode": True})
    status, body = post(stack.prefill_url + CHAT, leg, timeout=30)
    assert status == 200, body
    doc: dict[str, Any] = json.loads(body)
    return doc


def test_the_decode_pulls_the_blocks_once_and_a_second_pull_fails(stack: VllmStack) -> None:
    answer = _prefill_leg(stack)
    params = answer["kv_transfer_params"]
    info = get_json(stack.prefill_url + "/server_info?config_format=json")
    engine_id = info["vllm_config"]["kv_transfer_config"]["engine_id"]
    assert params["do_remote_prefill"] is True and params["remote_engine_id"] == engine_id
    assert params["remote_port"] == stack.side_port and params["remote_block_ids"]
    assert answer["usage"]["completion_tokens"] == 1
    status, body = post(stack.decode_url + CHAT, _chat(kv_transfer_params=params), timeout=30)
    assert status == 200 and sse_events(body)
    failed_before = metric(stack.decode_url, "vllm:nixl_num_failed_transfers_total")
    status, body = post(stack.decode_url + CHAT, _chat(kv_transfer_params=params), timeout=30)
    assert status == 500 and b"no KV blocks held" in body
    wrong = {**_prefill_leg(stack)["kv_transfer_params"], "remote_engine_id": "another-engine"}
    status, body = post(stack.decode_url + CHAT, _chat(kv_transfer_params=wrong), timeout=30)
    assert status == 500 and b"is not this engine's" in body
    failed = metric(stack.decode_url, "vllm:nixl_num_failed_transfers_total")
    assert failed == failed_before + 2


def test_the_router_learns_one_engine_per_worker_and_lists_both(stack: VllmStack) -> None:
    workers = get_json(stack.router_url + "/workers")["workers"]
    kinds = sorted(w["worker_type"] for w in workers)
    assert kinds == ["decode", "prefill"] and all(w["is_healthy"] for w in workers)
    models = get_json(stack.router_url + "/v1/models")
    assert models["data"][0]["id"] == "servelab-sim"


def test_the_load_endpoints_answer_what_the_router_and_vllm_clients_read(stack: VllmStack) -> None:
    assert get_json(stack.decode_url + "/get_load") == {"load": 0}
    assert get_json(stack.decode_url + "/load") == {"server_load": 0}
