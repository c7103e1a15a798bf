"""No placeholder model: when the entry point's ``GET /v1/models`` lists none, ``verify``'s e2e
check fails naming the URL, and a soak or a rolling restart stops before it sends anything (the
rolling restart before it takes a worker out), naming it too; a bench without ``--model`` stops
before its load. The entry point here is a real loopback HTTP server that lists an empty worker
set and an empty model list, answers 404 to everything else, and counts what it was sent."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from tests.support import run_cli


class _Router(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str]]] = []

    def _answer(self) -> None:
        self.seen.append((self.command, self.path))
        if self.command == "GET" and self.path in ("/workers", "/readiness", "/health"):
            body = json.dumps({"workers": [], "status": "ready"}).encode()
            self.send_response(200)
        elif self.command == "GET" and self.path == "/v1/models":
            body = json.dumps({"object": "list", "data": []}).encode()
            self.send_response(200)
        else:
            body = b'{"error": "not found"}'
            self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def router() -> Iterator[tuple[str, list[tuple[str, str]]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Router)
    _Router.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Router.seen
    finally:
        server.shutdown()
        server.server_close()


def _spec(root: Path, url: str) -> Path:
    spec = root / "servelab.toml"
    spec.write_text(f"""name = "no-model"
state_dir = "state"

[services.decode-1]
role = "decode"
url = "http://127.0.0.1:9"
start = "true"

[services.decode-2]
role = "decode"
url = "http://127.0.0.1:11"
start = "true"

[services.router]
role = "router"
url = "{url}"
start = "true"
depends_on = ["decode-1", "decode-2"]
router = {{ kind = "smg", prometheus_port = 13 }}
""")
    return spec


def test_verify_e2e_fails_naming_the_models_url(
    router: tuple[str, list[tuple[str, str]]], tmp_path: Path
) -> None:
    url, seen = router
    spec = _spec(tmp_path, url)
    done = run_cli("verify", "-f", str(spec), "--layer", "e2e", "--json", "--ledger",
                   str(tmp_path / "l.db"), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stderr + done.stdout
    (check,) = json.loads(done.stdout)["checks"]
    assert check["ok"] is False and check["code"] == "e2e.error", check
    assert f"{url}/v1/models lists no model" in check["detail"], check
    assert not [path for method, path in seen if method == "POST"]  # no placeholder was sent


def test_soak_stops_before_sending_naming_the_url(
    router: tuple[str, list[tuple[str, str]]], tmp_path: Path
) -> None:
    url, seen = router
    done = run_cli("soak", "--url", url, "--sessions", "1", "--rounds", "1", "--duration", "20",
                   "--no-ledger", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stderr + done.stdout
    assert f"{url}/v1/models lists no model" in done.stderr, done.stderr
    assert not [path for method, path in seen if method == "POST"]


def test_rolling_restart_stops_before_taking_a_worker_out(
    router: tuple[str, list[tuple[str, str]]], tmp_path: Path
) -> None:
    url, seen = router
    spec = _spec(tmp_path, url)
    done = run_cli("restart", "--rolling", "decode", "-f", str(spec), "--ledger",
                   str(tmp_path / "l.db"), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stderr + done.stdout
    assert f"{url}/v1/models lists no model" in done.stderr + done.stdout
    assert not [path for method, path in seen if method in ("POST", "DELETE")]


def test_bench_without_a_model_stops_before_its_load(
    router: tuple[str, list[tuple[str, str]]], tmp_path: Path
) -> None:
    url, seen = router
    done = run_cli("bench", "--url", url, "--concurrency", "1", "--requests", "2", "--no-ledger",
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode != 0, done.stderr + done.stdout
    assert f"{url}/v1/models lists no model" in done.stderr and "--model" in done.stderr
    assert not [path for method, path in seen if method == "POST"]
    # with --model the load goes (and meets the 404s: no placeholder was needed)
    given = run_cli("bench", "--url", url, "--model", "m", "--concurrency", "1", "--requests", "2",
                    "--no-ledger", cwd=tmp_path)  # fmt: skip
    assert given.returncode != 0 and [p for m, p in seen if m == "POST"], given.stderr


def test_a_soak_stopped_by_no_model_is_recorded_as_not_ok(
    router: tuple[str, list[tuple[str, str]]], tmp_path: Path
) -> None:
    """The sixth hostile pass: a soak that ended in "lists no model" (exit 1) was recorded in
    the ledger as ``ok: true`` with no round run."""
    url, _seen = router
    ledger = tmp_path / "l.db"
    done = run_cli("soak", "--url", url, "--sessions", "1", "--rounds", "1", "--duration", "20",
                   "--ledger", str(ledger), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stderr + done.stdout
    with sqlite3.connect(ledger) as db:
        rows = db.execute("SELECT ok FROM soak_runs").fetchall()
    assert rows and all(not ok for (ok,) in rows), rows
