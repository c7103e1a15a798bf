"""Each fault switch does what it says; the waiting timeout; start-up behaviour; admin gating."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import aiohttp
import pytest

from tests.support import free_port, free_ports, run_cli
from tests.support.http import get_json, get_status, metric, post, set_faults
from tests.support.stack import SimStack, sim_stack, start_process, stop_process, wait_http

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]


def chat(prompt: str, **extra: object) -> dict[str, object]:
    return {"model": "sim", "messages": [{"role": "user", "content": prompt}], **extra}


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    with sim_stack(time_scale=0.05, env={"SERVELAB_SIM_WARMUP_S": "0"}) as st:
        yield st


def test_room_that_never_arrives_times_out_with_500(tmp_path: Path) -> None:
    port, boot = free_ports(2)
    argv = [sys.executable, "-m", "servelab", "sim", "decode", "--port", str(port)]
    argv += ["--waiting-timeout", "1", "--enable-metrics"]
    proc = start_process(argv, tmp_path / "decode.log")
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/health", 30, proc)
        body = chat("x", max_tokens=4, bootstrap_room=42, bootstrap_host="127.0.0.1")
        body["bootstrap_port"] = boot  # nobody listens: stays Bootstrapping, then times out
        t0 = time.monotonic()
        status, raw = post(base + "/v1/chat/completions", body, timeout=20)
        elapsed = time.monotonic() - t0
        assert status == 500 and "timed out" in json.loads(raw)["message"]
        assert 0.9 <= elapsed < 5
        info = get_json(base + "/server_info")["servelab"]
        assert info["knobs"]["SGLANG_DISAGGREGATION_WAITING_TIMEOUT"] == 1
        assert metric(base, "sglang:num_transfer_failed_reqs_total") == 1  # a timeout counts
    finally:
        stop_process(proc)


def test_transfer_failure_is_500_and_counted(stack: SimStack) -> None:
    set_faults(stack.decode_url, transfer_fail_prob=1.0)
    try:
        status, raw = post(stack.decode_url + "/v1/chat/completions", chat("f", max_tokens=4))
        assert status == 500 and "failed" in json.loads(raw)["message"]
        status, _ = post(stack.router_url + "/v1/chat/completions", chat("f2", max_tokens=4))
        assert status >= 500
        assert metric(stack.decode_url, "sglang:num_transfer_failed_reqs_total") >= 2
    finally:
        set_faults(stack.decode_url, transfer_fail_prob=0.0)
    status, _ = post(stack.decode_url + "/v1/chat/completions", chat("ok", max_tokens=4))
    assert status == 200


def test_corrupt_under_load_breaks_tool_json_only_above_x(stack: SimStack) -> None:
    url = stack.decode_url + "/v1/chat/completions"
    prompts = [f"tool {i}" for i in range(16)]

    def tool_args(results: list[tuple[int, bytes]]) -> list[str]:
        out = []
        for status, body in results:
            assert status == 200
            for call in json.loads(body)["choices"][0]["message"].get("tool_calls") or []:
                out.append(call["function"]["arguments"])
        return out

    def broken(args: list[str]) -> int:
        n = 0
        for a in args:
            try:
                json.loads(a)
            except json.JSONDecodeError:
                n += 1
        return n

    set_faults(stack.decode_url, corrupt_under_load=4)
    try:
        alone = tool_args([post(url, chat(p, max_tokens=200, tools=TOOLS)) for p in prompts[:4]])
        assert alone and broken(alone) == 0  # C1 is below X: well-formed
        # Five long streams held open (never read) keep the decode above X, however fast or slow
        # the machine is; every tool request then arrives with more than 4 in flight.
        with _held_streams(stack.decode_url, 5):
            together = threading.Barrier(len(prompts), timeout=30)

            def send(prompt: str) -> tuple[int, bytes]:
                together.wait()
                return post(url, chat(prompt, max_tokens=400, tools=TOOLS))

            with ThreadPoolExecutor(len(prompts)) as pool:
                loaded = tool_args(list(pool.map(send, prompts)))
        assert broken(loaded) > 0
    finally:
        set_faults(stack.decode_url, corrupt_under_load=None)


@contextlib.contextmanager
def _held_streams(base: str, n: int) -> Iterator[None]:
    """``n`` long streaming requests to ``base`` that nobody reads until they are all running
    (bounded: 60 s); read to their end on exit (a client going away would count as an abort)."""
    port = int(base.rsplit(":", 1)[1])
    body = json.dumps(chat("hold", max_tokens=4000, stream=True)).encode()
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=60) for _ in range(n)]
    try:
        for conn in conns:
            conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        deadline = time.monotonic() + 60
        while metric(base, "sglang:num_running_reqs") < n:
            assert time.monotonic() < deadline, "the held streams never all ran"
            time.sleep(0.05)
        yield
        for conn in conns:
            response = conn.getresponse()
            assert response.status == 200
            response.read()
    finally:
        for conn in conns:
            conn.close()


async def _abort_streams(url: str, n: int) -> None:
    async with aiohttp.ClientSession() as session:
        for i in range(n):
            body = chat(f"abort {i}", max_tokens=100_000, stream=True)
            resp = await session.post(url, json=body)
            assert resp.status == 200
            await resp.content.readany()
            resp.close()  # the client goes away mid-stream


def test_abort_wedge_hangs_new_requests_while_health_stays_200(stack: SimStack) -> None:
    set_faults(stack.decode_url, abort_wedge="3/30")
    try:
        asyncio.run(_abort_streams(stack.router_url + "/v1/chat/completions", 3))
        deadline = time.monotonic() + 10
        while not get_json(stack.decode_url + "/server_info")["servelab"]["wedged"]:
            assert time.monotonic() < deadline, "decode never saw the aborts"
            time.sleep(0.1)
        tokens = metric(stack.decode_url, "sglang:generation_tokens_total")
        with pytest.raises(TimeoutError):
            post(stack.decode_url + "/v1/chat/completions", chat("hang", max_tokens=2), timeout=1.5)
        assert post(stack.decode_url + "/flush_cache", {})[0] == 200
        assert get_status(stack.decode_url + "/health") == 200
        assert metric(stack.decode_url, "sglang:generation_tokens_total") == tokens
    finally:
        set_faults(stack.decode_url, abort_wedge=None)
    status, _ = post(stack.decode_url + "/v1/chat/completions", chat("after", max_tokens=2))
    assert status == 200


def test_slow_start_and_no_admin_without_flag(tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "servelab", "sim", "decode", "--port", str(port)]
    env = {"SERVELAB_SIM_SLOW_START_S": "1.5", "SERVELAB_SIM_TIME_SCALE": "0.01"}
    t0 = time.monotonic()
    proc = start_process(argv, tmp_path / "decode.log", env)
    base = f"http://127.0.0.1:{port}"
    try:
        saw_503 = False
        while time.monotonic() - t0 < 20 and (status := get_status(base + "/health")) != 200:
            saw_503 = saw_503 or status == 503
            time.sleep(0.05)
        assert saw_503 and time.monotonic() - t0 >= 1.4
        status, _ = post(base + "/_servelab/faults", {})
        assert status in (404, 405)
    finally:
        stop_process(proc)


def test_admin_refused_on_non_loopback_bind() -> None:
    result = run_cli("sim", "decode", "--host", "0.0.0.0", "--port", "1", "--admin", timeout=30)
    assert result.returncode == 1 and "loopback" in result.stderr
