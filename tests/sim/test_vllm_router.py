"""Which of vllm-router 0.1.17's endpoints tell the truth about readiness (observed, not assumed).

The facts :mod:`servelab.core.engines` encodes: the router does not listen until every worker
is healthy; then ``/liveness`` is always 200, ``/health`` is 200 only while every worker is healthy,
``/readiness`` while each role has a healthy worker (two decodes, one down: 200 with 1/2,
while ``/health`` is 503); both follow its health checker.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.engines import VLLM
from tests.support import free_ports
from tests.support.stack import start_process, stop_process, wait_http
from tests.support.vllmstack import VllmStack


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def _until(url: str, status: int, timeout: float = 20.0) -> tuple[int, str]:
    deadline = time.monotonic() + timeout
    got = _get(url)
    while got[0] != status and time.monotonic() < deadline:
        time.sleep(0.25)
        got = _get(url)
    return got


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[VllmStack]:
    st = VllmStack(*free_ports(5), tmp_path, 0.05)
    try:
        yield st
    finally:
        st.stop()


def test_readiness_liveness_and_health_of_the_real_vllm_router(stack: VllmStack) -> None:
    assert VLLM.router_ready_path == "/readiness" and VLLM.router_all_healthy_path == "/health"
    stack.start_worker("prefill")
    stack.start_router(wait=False)
    time.sleep(3)
    # A decode is down: the router waits for it and does not listen at all.
    assert _get(stack.router_url + "/liveness")[0] == 0
    assert _get(stack.router_url + "/readiness")[0] == 0
    stack.start_worker("decode")
    status, body = _until(stack.router_url + "/readiness", 200, 30)
    assert status == 200, body
    doc = json.loads(body)
    assert doc["status"] == "ready" and doc["decode"] == {"healthy": 1, "total": 1}
    assert _get(stack.router_url + "/health") == (200, "All servers healthy")
    assert _get(stack.router_url + "/liveness") == (200, "OK")
    stack.stop_worker("decode")
    status, body = _until(stack.router_url + "/readiness", 503)
    doc = json.loads(body)
    assert status == 503 and doc["status"] == "not_ready"
    assert doc["reason"] == "no healthy decode workers" and doc["decode"]["healthy"] == 0
    status, body = _get(stack.router_url + "/health")
    assert status == 503 and body.startswith("Unhealthy servers:") and stack.decode_url in body
    assert _get(stack.router_url + "/liveness") == (200, "OK")  # proves nothing about workers
    stack.start_worker("decode")
    assert _until(stack.router_url + "/readiness", 200)[0] == 200


def test_with_two_decodes_one_down_readiness_stays_200_and_health_turns_503(
    stack: VllmStack,
) -> None:
    """/readiness: each role has a healthy worker; /health: every worker is healthy."""
    (second_port,) = free_ports(1)
    second = f"http://127.0.0.1:{second_port}"
    argv = [sys.executable, "-m", "servelab", "sim", "decode", "--engine", "vllm"]
    argv += ["--port", str(second_port)]
    env = {"SERVELAB_SIM_TIME_SCALE": "0.05"}
    extra = start_process(argv, stack.log_dir / "decode2.log", env)
    try:
        wait_http(second + "/health", 30, extra)
        stack.start_worker("prefill")
        stack.start_worker("decode")
        router = [sys.executable, "-m", "vllm_router.launch_router", "--host", "127.0.0.1"]
        router += ["--port", str(stack.router_port), "--vllm-pd-disaggregation"]
        router += ["--prefill", stack.prefill_url, "--decode", stack.decode_url, "--decode", second]
        router += ["--worker-startup-check-interval", "1", "--health-check-interval-secs", "1"]
        router += [
            "--prometheus-host",
            "127.0.0.1",
            "--prometheus-port",
            str(stack.prometheus_port),
        ]
        stack.procs["router"] = start_process(router, stack.log_dir / "router.log")
        assert _until(stack.router_url + "/readiness", 200, 30)[0] == 200
        stop_process(extra)
        status, body = _until(stack.router_url + "/health", 503)
        assert status == 503 and second in body
        status, body = _get(stack.router_url + "/readiness")
        assert status == 200 and json.loads(body)["decode"] == {"healthy": 1, "total": 2}
    finally:
        stop_process(extra)
