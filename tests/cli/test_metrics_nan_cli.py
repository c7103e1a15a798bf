"""Issue 38, seventh pass, H4, through the real CLI: a decode whose ``/metrics`` says ``NaN`` (or
``+Inf``) for its request counter crashed ``verify`` with "unexpected ValueError: cannot convert
float NaN to integer", exit 1, no report. A sample that is no finite number is not reported: the
e2e probe goes on without the counter (a second probe decides cold or warm) and passes.

The entry point and the decode are two real loopback HTTP servers of one handler: it lists a
model, streams a short chat answer and serves the hostile ``/metrics``; it counts the chat
requests it answered.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from tests.support import run_cli

#: The decode's hostile exposition: its served counter NaN, its running gauge +Inf, and a series
#: of 1e308 twice (their sum overflows to infinity).
METRICS = """\
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{model_name="m"} NaN
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} +Inf
sglang:num_queue_reqs{model_name="m"} -Inf
sglang:num_requests_total{model_name="n"} 1e308
sglang:num_requests_total{model_name="o"} 1e308
"""


def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


class _Stack(BaseHTTPRequestHandler):
    chats: ClassVar[list[str]] = []
    protocol_version = "HTTP/1.1"

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            models = {"object": "list", "data": [{"id": "m", "object": "model"}]}
            self._send(200, json.dumps(models).encode(), "application/json")
        elif self.path == "/metrics":
            self._send(200, METRICS.encode(), "text/plain; version=0.0.4")
        else:
            self._send(200, b'{"status": "ok"}', "application/json")

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.chats.append(self.path)
        delta = {"role": "assistant", "content": "hi"}
        chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
        usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
        body = _sse(chunk) + _sse({"choices": [], "usage": usage}) + b"data: [DONE]\n\n"
        self._send(200, body, "text/event-stream")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def stack() -> Iterator[tuple[str, str]]:
    """The router's and the decode's base URLs."""
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _Stack) for _ in range(2)]
    _Stack.chats = []
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        router, decode = (f"http://127.0.0.1:{s.server_address[1]}" for s in servers)
        yield router, decode
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def test_verify_e2e_passes_when_the_decode_metrics_say_nan(
    stack: tuple[str, str], tmp_path: Path
) -> None:
    router, decode = stack
    spec = tmp_path / "servelab.toml"
    spec.write_text(f"""name = "nan-metrics"
state_dir = "state"

[services.decode]
role = "decode"
url = "{decode}"
start = "true"

[services.router]
role = "router"
url = "{router}"
start = "true"
depends_on = ["decode"]
""")
    done = run_cli("verify", "-f", str(spec), "--layer", "e2e", "--answer-probes", "0", "--json",
                   "--ledger", str(tmp_path / "l.db"), cwd=tmp_path, timeout=60)  # fmt: skip
    assert "unexpected" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr + done.stdout
    (check,) = json.loads(done.stdout)["checks"]
    assert check["ok"] is True and check["code"] == "e2e.passed", check
    # no counter was read (NaN, ±Inf and an overflowing sum are not reported): a second probe
    assert _Stack.chats == ["/v1/chat/completions"] * 2
