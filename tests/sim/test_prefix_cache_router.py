"""Multi-round sessions through the REAL sglang-router: the prefill's prefix cache serves each
round's prompt but its new tokens, the decode reports the cached tokens (``--enable-cache-report``)
and the prefill's ``/metrics`` counts them, as SGLang names them."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servelab.sim.profile import DEFAULT_PROFILE, prefill_chunk_s
from servelab.sim.text import count_tokens
from tests.support import free_ports
from tests.support.http import get_json, metric, post
from tests.support.stack import SimStack, sim_stack, start_process, stop_process, wait_http

P = DEFAULT_PROFILE
SCALE = 0.5
ROUNDS = 4


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    env = {"SERVELAB_SIM_WARMUP_S": "0"}
    with sim_stack(time_scale=SCALE, env=env, decode_args=["--enable-cache-report"]) as st:
        yield st


def _session(stack: SimStack, name: str, system_words: int) -> list[dict[str, Any]]:
    """One agent-like session: a long system prompt, then each round the previous answer and a
    new user message; every round's ``usage`` as the client got it through the router."""
    system = " ".join(f"{name}{i}" for i in range(system_words))
    messages: list[dict[str, str]] = [{"role": "system", "content": system}]
    usages = []
    for k in range(ROUNDS):
        messages.append({"role": "user", "content": f"round {k} " + "please go on " * 6})
        body = {"model": "sim", "messages": messages, "max_tokens": 8}
        status, raw = post(stack.router_url + "/v1/chat/completions", body, timeout=60)
        assert status == 200, raw
        doc = json.loads(raw)
        usages.append(doc["usage"])
        messages.append({"role": "assistant", "content": doc["choices"][0]["message"]["content"]})
    return usages


def _cached(usage: dict[str, Any]) -> int:
    details = usage.get("prompt_tokens_details")
    return 0 if details is None else int(details["cached_tokens"])


def test_each_session_hits_its_cache_from_round_2(stack: SimStack) -> None:
    for name, size in (("alpha", 300), ("beta", 500), ("gamma", 800)):
        usages = _session(stack, name, size)
        assert _cached(usages[0]) / usages[0]["prompt_tokens"] < 0.05  # a cold round
        for usage in usages[1:]:
            assert _cached(usage) / usage["prompt_tokens"] > 0.8, usages
    hits = metric(stack.prefill_url, "sglang:cached_tokens_total")
    assert hits > 0 and 0.0 < metric(stack.prefill_url, "sglang:cache_hit_rate") <= 1.0


def test_a_warm_round_takes_the_prefill_time_of_its_new_tokens(stack: SimStack) -> None:
    usages = _session(stack, "delta", 6000)
    recent = get_json(stack.prefill_url + "/server_info")["servelab"]["recent_prefills"]
    by_prompt = {r["prompt_tokens"]: r for r in recent}
    cold, warm = by_prompt[usages[0]["prompt_tokens"]], by_prompt[usages[1]["prompt_tokens"]]
    assert cold["cached_tokens"] < 10  # what every session shares: the "system:" lead-in
    assert warm["cached_tokens"] == _cached(usages[1])
    new = warm["prompt_tokens"] - warm["cached_tokens"]
    assert new < 60
    expected = P.prefill_a_s + prefill_chunk_s(P, new, warm["cached_tokens"])
    assert warm["modelled_s"] == pytest.approx(expected, rel=1e-3)
    assert cold["modelled_s"] > 10 * warm["modelled_s"]
    assert warm["wall_s"] < cold["wall_s"] / 4  # what the prefill really waited, at SCALE


def test_without_the_cache_report_no_prompt_tokens_details(stack: SimStack) -> None:
    """The prefill (no --enable-cache-report) answers without ``prompt_tokens_details``."""
    body = {"model": "sim", "messages": [{"role": "user", "content": "hello " * 50}]}
    status, raw = post(stack.prefill_url + "/v1/chat/completions", {**body, "max_tokens": 2})
    assert status == 200 and "prompt_tokens_details" not in json.loads(raw)["usage"]


def test_a_vllm_prefill_reports_its_cache_as_vllm_does(tmp_path: Path) -> None:
    ports = free_ports(2)
    argv = [sys.executable, "-m", "servelab", "sim", "prefill", "--engine", "vllm", "--port"]
    argv += [str(ports[0]), "--bootstrap-port", str(ports[1]), "--enable-prompt-tokens-details"]
    env = {"SERVELAB_SIM_TIME_SCALE": "0.05", "SERVELAB_SIM_WARMUP_S": "0"}
    proc = start_process(argv, tmp_path / "vllm-prefill.log", env)
    url = f"http://127.0.0.1:{ports[0]}"
    prompt = "the same long prompt " * 40
    leg = {"model": "sim", "messages": [{"role": "user", "content": prompt}], "max_tokens": 1}
    leg["kv_transfer_params"] = {"do_remote_decode": True}
    try:
        wait_http(url + "/health", 30, proc)
        usages = []
        for _ in range(2):
            status, raw = post(url + "/v1/chat/completions", leg)
            assert status == 200, raw
            usages.append(json.loads(raw)["usage"])
        queries = metric(url, "vllm:prefix_cache_queries_total")
        hits = metric(url, "vllm:prefix_cache_hits_total")
    finally:
        stop_process(proc)
    assert usages[0]["prompt_tokens_details"] == {"cached_tokens": 0}  # vLLM: 0 is reported
    cached = usages[1]["prompt_tokens_details"]["cached_tokens"]
    tokens = count_tokens("user: " + prompt)
    assert cached == (tokens - 1) // 16 * 16  # whole blocks of 16, never the last token
    assert queries == 2 * tokens and hits == cached
