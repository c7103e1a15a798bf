"""The proxy's other faults, in front of the real router: buffer, cut after N bytes, chunk delay.

Each switch is turned on at run time through ``POST /_servelab/faults`` (the start-up path, flags
and ``SERVELAB_PROXY_*``, is covered by the last tests) and shown by its observable behaviour.
"""

from __future__ import annotations

import http.client
import itertools
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.errors import SimError
from servelab.sim.proxyfaults import ProxyFaults
from tests.support import free_port
from tests.support.http import get_json, post, set_faults
from tests.support.stack import SimStack, sim_stack, start_process, stop_process, wait_http

OFF = {"stall_reused_after": None, "buffer": False, "cut_after_bytes": None, "chunk_delay_ms": 0}


def _body(max_tokens: int, stream: bool) -> dict[str, object]:
    msgs = [{"role": "user", "content": "proxy faults"}]
    return {"model": "sim", "messages": msgs, "max_tokens": max_tokens, "stream": stream}


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    with sim_stack(time_scale=0.05, env={"SERVELAB_SIM_WARMUP_S": "0"}, proxy=True) as st:
        yield st


@pytest.fixture
def proxy(stack: SimStack) -> Iterator[str]:
    assert stack.proxy_url is not None
    yield stack.proxy_url
    set_faults(stack.proxy_url, **OFF)


def _arrivals(
    url: str, body: dict[str, object], timeout: float = 20
) -> tuple[float, list[tuple[float, bytes]], http.client.HTTPResponse]:
    """Send ``body``; (t0, [(arrival time, chunk)], response) as the chunks came in."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    t0 = time.monotonic()
    headers = {"Content-Type": "application/json"}
    conn.request("POST", "/v1/chat/completions", json.dumps(body), headers)
    resp = conn.getresponse()
    got = []
    try:
        while chunk := resp.read1(65536):
            got.append((time.monotonic(), chunk))
    except http.client.IncompleteRead as exc:
        got.append((time.monotonic(), bytes(exc.partial)))
    finally:
        conn.close()
    return t0, got, resp


def test_buffer_holds_a_stream_until_it_finished(proxy: str) -> None:
    _, plain, _ = _arrivals(proxy, _body(400, True))
    assert len(plain) >= 3 and plain[-1][0] - plain[0][0] > 0.05  # streamed through
    set_faults(proxy, buffer=True)
    _, held, resp = _arrivals(proxy, _body(400, True))
    text = b"".join(c for _, c in held)
    assert text.rstrip().endswith(b"data: [DONE]") and text.count(b"data: ") >= 400
    assert held[-1][0] - held[0][0] < 0.05  # all at once, after the upstream finished
    assert resp.getheader("Content-Length") == str(len(text))
    assert get_json(proxy + "/_servelab/faults")["buffered"] >= 1


def test_cut_after_bytes_closes_the_connection_mid_stream(proxy: str) -> None:
    set_faults(proxy, cut_after_bytes=300)
    _, got, resp = _arrivals(proxy, _body(200, True))
    text = b"".join(c for _, c in got)
    assert resp.status == 200 and 0 < len(text) <= 300  # the status came; the body did not end
    assert b"[DONE]" not in text
    _, got, _ = _arrivals(proxy, _body(200, False))  # non-streaming bodies are cut too
    assert len(b"".join(c for _, c in got)) <= 300
    assert get_json(proxy + "/_servelab/faults")["cut"] >= 2
    set_faults(proxy, cut_after_bytes=None)
    _, got, _ = _arrivals(proxy, _body(200, True))
    assert b"".join(c for _, c in got).rstrip().endswith(b"data: [DONE]")


def test_chunk_delay_spaces_every_chunk(proxy: str) -> None:
    t0, plain, _ = _arrivals(proxy, _body(8, True))
    assert plain[0][0] - t0 < 0.3
    set_faults(proxy, chunk_delay_ms=300)
    t0, slow, _ = _arrivals(proxy, _body(8, True))
    assert slow[0][0] - t0 >= 0.3  # the first byte waited
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(slow)]
    assert all(g >= 0.25 for g in gaps), gaps
    assert b"".join(c for _, c in slow).rstrip().endswith(b"data: [DONE]")


def test_the_fault_endpoint_validates_and_shows_every_switch(proxy: str) -> None:
    state = set_faults(proxy, buffer="1", chunk_delay_ms=5)
    assert state["buffer"] is True and state["chunk_delay_ms"] == 5.0
    assert {"stall_reused_after", "cut_after_bytes", "forwarded", "upstream"} <= set(state)
    for bad in ({"nope": 1}, {"cut_after_bytes": -1}, {"chunk_delay_ms": "x"}, [1]):
        status, body = post(proxy + "/_servelab/faults", bad)
        assert status == 400, body


def test_switches_from_env_and_flags_at_start(stack: SimStack, tmp_path: Path) -> None:
    env = {"SERVELAB_PROXY_BUFFER": "1", "SERVELAB_PROXY_CHUNK_DELAY_MS": "7"}
    faults = ProxyFaults.from_env({**env, "SERVELAB_PROXY_CUT_AFTER_BYTES": "9"})
    assert faults.buffer and faults.chunk_delay_ms == 7.0 and faults.cut_after_bytes == 9
    with pytest.raises(SimError):
        ProxyFaults.from_env({"SERVELAB_PROXY_BUFFER": "sometimes"})
    port = free_port()
    argv = [sys.executable, "-m", "servelab", "sim", "proxy", "--port", str(port), "--admin"]
    argv += ["--upstream", stack.router_url, "--cut-after-bytes", "50"]
    proc = start_process(argv, tmp_path / "proxy.log", env)
    try:
        url = f"http://127.0.0.1:{port}/_servelab/faults"
        wait_http(url, 30, proc)
        state = get_json(url)
        assert state["buffer"] is True and state["chunk_delay_ms"] == 7.0  # from the env
        assert state["cut_after_bytes"] == 50  # from the flag
    finally:
        stop_process(proc)
