"""The simulated engines on bad input, as the real ones behave (``shared/notes/
engine-contracts.md`` §9): a prompt past the context length is answered 400 in the engine's words
at once, whatever its size; a request whose client goes away while it waits for its prefill is
cancelled, so it holds up no later request. Real worker processes."""

from __future__ import annotations

import json
import socket
import sys
import time
import urllib.error
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import free_ports
from tests.support.http import get_json, post
from tests.support.stack import start_process, stop_process, wait_http


def _worker(tmp_path: Path, *argv: str, scale: str = "0.05") -> Iterator[str]:
    port, side = free_ports(2)
    role = argv[0]
    args = [sys.executable, "-m", "servelab", "sim", *argv, "--port", str(port)]
    if role == "prefill":
        args += ["--bootstrap-port", str(side)]
    env = {"SERVELAB_SIM_TIME_SCALE": scale}
    proc = start_process(args, tmp_path / f"{role}.log", env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health", 60, proc)
        yield url
    finally:
        stop_process(proc)


@pytest.fixture
def sglang(tmp_path: Path) -> Iterator[str]:
    yield from _worker(tmp_path, "prefill", "--context-length", "64")


@pytest.fixture
def vllm(tmp_path: Path) -> Iterator[str]:
    yield from _worker(tmp_path, "decode", "--engine", "vllm", "--max-model-len", "64")


def _chat(words: int, max_tokens: int = 4) -> dict[str, object]:
    prompt = " ".join(["hello"] * words)
    return {"model": "m", "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens}  # fmt: skip


def test_sglang_refuses_a_prompt_past_its_context_in_its_own_words(sglang: str) -> None:
    status, body = post(sglang + "/v1/chat/completions", _chat(100))
    assert status == 400
    answer = json.loads(body)
    assert answer == {
        "object": "error",
        "message": answer["message"],
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    assert answer["message"].startswith("The input (")
    assert answer["message"].endswith(
        " tokens) is longer than the model's context length (64 tokens)."
    )
    status, body = post(sglang + "/generate", {"text": " ".join(["hi"] * 100)})
    assert status == 400 and set(json.loads(body)) == {"error"}
    assert post(sglang + "/v1/chat/completions", _chat(10))[0] == 200  # one that fits
    status, body = post(sglang + "/v1/chat/completions", _chat(2_000_000), timeout=60)
    assert status == 400, "a huge prompt is refused, not computed"


def test_vllm_refuses_a_prompt_and_output_past_its_context_in_its_own_words(vllm: str) -> None:
    status, body = post(vllm + "/v1/chat/completions", _chat(50, max_tokens=30))
    assert status == 400
    error = json.loads(body)["error"]
    assert error["type"] == "BadRequestError" and error["param"] == "input_tokens"
    assert error["code"] == 400
    assert error["message"].startswith("This model's maximum context length is 64 tokens. "
                                       "However, you requested 30 output tokens and your prompt "
                                       "contains ")  # fmt: skip
    assert post(vllm + "/v1/chat/completions", _chat(10, max_tokens=4))[0] == 200


@pytest.fixture
def slow_prefill(tmp_path: Path) -> Iterator[str]:
    """A prefill at full time scale: a 150,000-token prompt takes it about 30 s."""
    yield from _worker(tmp_path, "prefill", scale="1")


def _send(url: str, body: bytes) -> socket.socket:
    """Send a request on a new connection, leaving its answer unread."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")  # fmt: skip
    sock.sendall(head.encode() + body)
    return sock


def _load(url: str) -> int:
    return int(get_json(url + "/get_load")[0]["num_reqs"])


def _until(condition: Callable[[], bool], seconds: float, why: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, why
        time.sleep(0.05)


def test_a_request_whose_client_left_is_cancelled_and_holds_up_nothing(slow_prefill: str) -> None:
    sock = _send(slow_prefill, json.dumps(_chat(150_000)).encode())
    with sock:
        _until(lambda: _load(slow_prefill) > 0, 60, "the long request never reached the queue")
    # its prefill takes about 30 s more: only a cancellation frees the worker sooner
    _until(lambda: _load(slow_prefill) == 0, 10, "the request whose client left was not cancelled")
    pool = get_json(slow_prefill + "/server_info")["servelab"]["kv_pool"]
    assert pool["in_flight_tokens"] == 0  # its KV reservation released
    try:
        assert post(slow_prefill + "/v1/chat/completions", _chat(8), timeout=20)[0] == 200
    except urllib.error.URLError as exc:
        pytest.fail(f"a later request hung: {exc}")
