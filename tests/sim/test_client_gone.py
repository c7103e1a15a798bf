"""A client that leaves while its request waits for its KV: the decode aborts that request (as
an engine aborts a request whose connection closed) and goes on serving the others."""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import free_ports
from tests.support.http import get_json, metric, post
from tests.support.stack import start_process, stop_process, wait_http


def _chat(prompt: str, **extra: object) -> dict[str, object]:
    return {"model": "sim", "messages": [{"role": "user", "content": prompt}], **extra}


@pytest.fixture
def decode(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A decode worker whose KV never arrives (nobody serves its bootstrap port), and that port."""
    port, boot = free_ports(2)
    argv = [sys.executable, "-m", "servelab", "sim", "decode", "--port", str(port)]
    argv += ["--waiting-timeout", "60", "--enable-metrics", "--time-scale", "0.05"]
    proc = start_process(argv, tmp_path / "decode.log", env={"SERVELAB_SIM_WARMUP_S": "0"})
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/health", 30, proc)
        yield base, boot
    finally:
        stop_process(proc)


def _wait_for(what: str, ok: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_that_leaves_while_its_kv_is_awaited_is_aborted(
    decode: tuple[str, int], stream: bool
) -> None:
    base, boot = decode
    port = int(base.rsplit(":", 1)[1])
    body = _chat("wait", max_tokens=4, stream=stream, bootstrap_room=7, bootstrap_host="127.0.0.1")
    body["bootstrap_port"] = boot
    data = json.dumps(body).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head + data)
        _wait_for("the request never waited", lambda: metric(base, "sglang:num_queue_reqs") == 1)
    t0 = time.monotonic()  # the client is gone: aborted within a look or two at its connection
    _wait_for("never aborted", lambda: metric(base, "sglang:num_aborted_requests_total") == 1)
    assert time.monotonic() - t0 < 10  # long before the 60 s waiting timeout
    _wait_for("still waiting", lambda: metric(base, "sglang:num_queue_reqs") == 0)
    assert get_json(base + "/server_info")["servelab"]["aborts"] == 1
    status, raw = post(base + "/v1/chat/completions", _chat("direct", max_tokens=3), timeout=20)
    assert status == 200 and json.loads(raw)["usage"]["completion_tokens"] == 3
    assert metric(base, "sglang:num_aborted_requests_total") == 1
