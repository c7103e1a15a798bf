"""``servelab init`` pointed at a URL that answers 302 (issue 38, the thirteenth pass: an auth
proxy in front of the router): init followed the redirect silently and said "no worker list (is
a router listening there?)". Now it follows none: one line says it was redirected, with what
status and where to (the ``Location``, its password and its secret query parameters masked),
exit 1 like any router init cannot read, no spec written, and the target never asked. Real tiny
HTTP servers on loopback, a real ``servelab init`` process."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support import free_ports, run_cli

PASSWORD = "RedirectPW4711"
TOKEN = "tok-REDIRECTPLANTED0123456789"


@contextmanager
def _server(status: int, location: str | None) -> Iterator[tuple[str, list[str]]]:
    """A server answering every GET with ``status`` (and ``Location``); the paths it was asked."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(status)
            if location is not None:
                self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    (port,) = free_ports(1)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}", asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.mark.parametrize("status", [301, 302, 307])
def test_a_redirect_is_said_with_its_location_masked_and_not_followed(
    tmp_path: Path, status: int
) -> None:
    with _server(200, None) as (target, target_asked):
        where = f"http://sso:{PASSWORD}@{target[7:]}/login?next=/workers&token={TOKEN}"
        with _server(status, where) as (url, asked):
            done = run_cli("init", "--router", url, "-o", str(tmp_path / "s.toml"), timeout=60)
    assert done.returncode == 1, (done.stdout, done.stderr)
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line, line
    assert f"GET {url}/workers: redirected ({status}) to http://sso:***@{target[7:]}/login" in line
    assert "not followed" in line and "is a router listening there" not in line
    assert PASSWORD not in line and TOKEN not in line and "token=***" in line, line
    assert asked == ["/workers"] and target_asked == []  # the Location was never asked
    assert not (tmp_path / "s.toml").exists()


def test_a_redirect_without_a_location_is_said_too(tmp_path: Path) -> None:
    with _server(302, None) as (url, _):
        done = run_cli("init", "--router", url, "-o", str(tmp_path / "s.toml"), timeout=60)
    assert done.returncode == 1 and f"GET {url}/workers: redirected (302)" in done.stderr
