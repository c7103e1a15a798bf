"""What the real sglang-router 0.3.2 answers for the sim's engine faults (docs/sim.md, facts).

- KV-transfer failure: not streaming, the decode's 500 comes back as 500 ``decode_internal_error``
  with the decode's SGLang message (after the router's retries); streaming, the decode's 200
  stream with its ``error`` event passes through; ``sglang:num_transfer_failed_reqs_total``
  counts every attempt. ``transfer_fail_over_tokens`` fails only long prompts.
- Prefill down (the process killed): once the router's health checks mark it unhealthy, 503
  ``server_selection_failed`` "No available prefill workers (all circuits open or unhealthy)".
- Circuit breaker: a decode failing fast (``fail_fast_s``) opens the breaker after
  ``--cb-failure-threshold`` failed attempts: 503 "No available ... workers", and the router's
  Prometheus shows ``smg_worker_cb_state`` 1 for that worker.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence

import pytest

from tests.support.http import metric, post, set_faults, sse_events
from tests.support.pd2 import two_decode_stack
from tests.support.stack import SimStack, start_process, start_stack, stop_process, wait_http

NO_PREFILL = "No available servers: No available prefill workers (all circuits open or unhealthy)"


def chat(prompt: str = "x", **extra: object) -> dict[str, object]:
    return {"model": "sim", "messages": [{"role": "user", "content": prompt}], **extra}


def _router(st: SimStack, args: Sequence[str] = ()) -> None:
    """The real router in front of the stack's workers, with extra flags."""
    argv = [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1"]
    argv += ["--port", str(st.router_port), "--pd-disaggregation"]
    argv += ["--prefill", st.prefill_url, str(st.bootstrap_port), "--decode", st.decode_url]
    argv += ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(st.prometheus_port)]
    argv += ["--worker-startup-timeout-secs", "60", "--health-check-interval-secs", "1", *args]
    st.procs["router"] = start_process(argv, st.log_dir / "router.log")
    wait_http(st.router_url + "/readiness", 60, st.procs["router"])


def _stack(decode_args: Sequence[str] = (), router_args: Sequence[str] = ()) -> SimStack:
    env = {"SERVELAB_SIM_WARMUP_S": "0"}
    st = start_stack(time_scale=0.05, env=env, decode_args=decode_args, router=False)
    try:
        _router(st, router_args)
    except BaseException:
        st.stop()
        raise
    return st


def _prom(st: SimStack, name: str, worker: str) -> float:
    url = f"http://127.0.0.1:{st.prometheus_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(f'{name}{{worker="{worker}"}}'):
                return float(line.rsplit(" ", 1)[1])
    raise KeyError(f"{name} for {worker}")


def _answer(url: str, body: dict[str, object]) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    st = _stack()
    try:
        yield st
    finally:
        st.stop()


def test_transfer_failure_through_the_router(stack: SimStack) -> None:
    url = stack.router_url + "/v1/chat/completions"
    before = metric(stack.decode_url, "sglang:num_transfer_failed_reqs_total")
    set_faults(stack.decode_url, transfer_fail_prob=1.0)
    try:
        status, headers, raw = _answer(url, chat(max_tokens=4))
        assert status == 500 and headers["x-smg-error-code"] == "decode_internal_error"
        error = json.loads(raw)["error"]
        assert error["code"] == "decode_internal_error"
        assert error["message"].startswith("Decode transfer failed for request rank=0")
        status, headers, raw = _answer(url, chat(max_tokens=4, stream=True))
        assert status == 200 and headers["content-type"].startswith("text/event-stream")
        events = sse_events(raw)
        assert len(events) == 1 and events[0]["error"]["code"] == 500
        assert "Decode transfer failed" in events[0]["error"]["message"]
        assert raw.rstrip().endswith(b"data: [DONE]")
    finally:
        set_faults(stack.decode_url, transfer_fail_prob=0.0)
    # the 500 was retried (one count per attempt), the stream was not
    assert metric(stack.decode_url, "sglang:num_transfer_failed_reqs_total") >= before + 3


def test_transfer_fail_over_tokens_fails_only_long_prompts(stack: SimStack) -> None:
    url = stack.router_url + "/v1/chat/completions"
    set_faults(stack.decode_url, transfer_fail_over_tokens=50)
    try:
        assert post(url, chat("short one", max_tokens=4))[0] == 200
        status, raw = post(url, chat(" ".join(["w"] * 51), max_tokens=4))
        assert status == 500 and "Decode transfer failed" in json.loads(raw)["error"]["message"]
    finally:
        set_faults(stack.decode_url, transfer_fail_over_tokens=None)
    assert post(url, chat(" ".join(["w"] * 51), max_tokens=4))[0] == 200


def test_prefill_down_is_503_no_available_prefill_workers() -> None:
    st = _stack(decode_args=["--waiting-timeout", "2"])
    try:
        url = st.router_url + "/v1/chat/completions"
        assert post(url, chat(max_tokens=4))[0] == 200
        stop_process(st.procs.pop("prefill"))
        deadline = time.monotonic() + 60
        while (answer := _answer(url, chat(max_tokens=4)))[0] != 503:
            assert time.monotonic() < deadline, answer
        _, headers, raw = answer
        assert headers["x-smg-error-code"] == "server_selection_failed"
        assert json.loads(raw) == {
            "error": {
                "type": "Service Unavailable",
                "code": "server_selection_failed",
                "message": NO_PREFILL,
            }
        }
        assert _answer(url, chat(max_tokens=4, stream=True))[0] == 503
        assert _prom(st, "smg_worker_health", st.prefill_url) == 0
        assert _prom(st, "smg_worker_health", st.decode_url) == 1
        assert _prom(st, "smg_worker_cb_state", st.prefill_url) == 0  # unhealthy, not tripped
    finally:
        st.stop()


def test_fail_fast_decode_opens_the_circuit_breaker() -> None:
    router_args = ["--cb-failure-threshold", "3", "--cb-timeout-duration-secs", "3"]
    st = _stack(router_args=router_args)
    try:
        url = st.router_url + "/v1/chat/completions"
        assert post(url, chat(max_tokens=4))[0] == 200
        assert _prom(st, "smg_worker_cb_state", st.decode_url) == 0
        set_faults(st.decode_url, fail_fast_s=4)
        status, raw = post(url, chat(max_tokens=4))  # 500s, retried, each counted
        deadline = time.monotonic() + 30
        while status != 503:
            assert time.monotonic() < deadline, (status, raw)
            status, raw = post(url, chat(max_tokens=4))
        message = json.loads(raw)["error"]["message"]
        assert message.startswith("No available servers: No available") and "workers" in message
        assert _prom(st, "smg_worker_cb_state", st.decode_url) == 1  # open
        deadline = time.monotonic() + 30  # fail_fast_s runs out, the breaker half-opens: healed
        while post(url, chat(max_tokens=4))[0] != 200:
            assert time.monotonic() < deadline, "the circuit never closed again"
            time.sleep(0.5)
    finally:
        st.stop()


def _prom_text(url: str, name: str, worker: str) -> float:
    with urllib.request.urlopen(url, timeout=10) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(f'{name}{{worker="{worker}"}}'):
                return float(line.rsplit(" ", 1)[1])
    raise KeyError(f"{name} for {worker}")


def test_one_of_two_decodes_failing_opens_only_its_own_breaker() -> None:
    router_args = ["--cb-failure-threshold", "3", "--cb-timeout-duration-secs", "60"]
    with two_decode_stack(router_args=router_args) as st:
        bad, good = st.decode_urls
        url = st.router_url + "/v1/chat/completions"
        set_faults(bad, fail_fast_s=600)
        statuses = [post(url, chat(f"q{i}", max_tokens=4))[0] for i in range(8)]
        assert statuses == [200] * 8  # each failed attempt was retried on the other decode
        cb = {u: _prom_text(st.prometheus_url, "smg_worker_cb_state", u) for u in st.decode_urls}
        assert cb == {bad: 1.0, good: 0.0}
        assert _prom_text(st.prometheus_url, "smg_worker_cb_state", st.prefill_url) == 0.0
        assert metric(good, "sglang:num_requests_total") >= 8
