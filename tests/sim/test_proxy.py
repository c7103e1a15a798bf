"""The faulty proxy in front of the real router: streams through; stalls only reused connections."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator

import pytest

from tests.support.http import post
from tests.support.stack import SimStack, sim_stack

BODY = {"model": "sim", "messages": [{"role": "user", "content": "via proxy"}], "max_tokens": 6}


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    env = {"SERVELAB_SIM_WARMUP_S": "0"}
    with sim_stack(
        time_scale=0.05, env=env, proxy=True, proxy_args=["--stall-reused-after", "1"]
    ) as st:
        yield st


def _port(stack: SimStack) -> int:
    assert stack.proxy_port is not None
    return stack.proxy_port


def _request(conn: http.client.HTTPConnection, body: dict[str, object]) -> tuple[int, bytes]:
    conn.request(
        "POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"}
    )
    resp = conn.getresponse()
    return resp.status, resp.read()


def test_fresh_connections_always_work(stack: SimStack) -> None:
    for _ in range(3):
        conn = http.client.HTTPConnection("127.0.0.1", _port(stack), timeout=10)
        try:
            status, body = _request(conn, BODY)
        finally:
            conn.close()
        assert status == 200 and json.loads(body)["usage"]["completion_tokens"] == 6


def test_reused_connection_stalls(stack: SimStack) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", _port(stack), timeout=2)
    try:
        assert _request(conn, BODY)[0] == 200
        with pytest.raises((TimeoutError, socket.timeout)):
            _request(conn, BODY)  # the same keep-alive connection: accepted, never answered
    finally:
        conn.close()
    status, body = post(f"{stack.proxy_url}/_servelab/faults", {"stall_reused_after": None})
    assert status == 200 and json.loads(body)["stalled"] >= 1


def test_without_the_fault_reuse_works_and_streams_chunk_by_chunk(stack: SimStack) -> None:
    post(f"{stack.proxy_url}/_servelab/faults", {"stall_reused_after": None})
    conn = http.client.HTTPConnection("127.0.0.1", _port(stack), timeout=10)
    try:
        for _ in range(3):
            assert _request(conn, BODY)[0] == 200
        body = {**BODY, "stream": True, "max_tokens": 200}
        conn.request(
            "POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"}
        )
        resp = conn.getresponse()
        assert resp.status == 200
        arrivals = []
        while chunk := resp.read1(65536):
            arrivals.append((time.monotonic(), chunk))
        text = b"".join(c for _, c in arrivals)
        assert text.rstrip().endswith(b"data: [DONE]")
        assert len(arrivals) >= 3  # streamed through, not buffered into one piece
        assert arrivals[-1][0] - arrivals[0][0] > 0.05
    finally:
        conn.close()
        post(f"{stack.proxy_url}/_servelab/faults", {"stall_reused_after": 1})
