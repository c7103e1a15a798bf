"""``servelab up`` failures are said once, as text (no raw HTML, no markup read from a service's
log or readiness body), with ``--json`` a failure document: a port held by another server, a bad
env line, a service never ready. Real processes, real loopback servers."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support import free_port
from tests.support.clierrors import (
    arun,
    failure_doc,
    generic_spec,
    one_line,
    run,
)
from tests.support.servers import answering_app, served


async def test_up_on_a_port_clash_prints_its_json_failure(tmp_path: Path) -> None:
    """The port's holder answers, not ready (a listener that never answered held the pre-flight's
    readiness probe for its whole 5 s timeout)."""
    async with served(answering_app(503, "busy", "text/plain")) as url:
        port = int(url.rsplit(":", 1)[1])
        generic_spec(tmp_path, port, "true")
        code, out, err = await arun("up", "--json", "--ledger", "l.db", cwd=tmp_path)
    assert code == 1, err
    doc = failure_doc(out)
    assert doc["command"] == "up" and doc["exit_code"] == 1
    assert str(port) in doc["error"]


def test_up_with_a_bad_env_line_prints_its_json_failure(tmp_path: Path) -> None:
    generic_spec(tmp_path, free_port(), "true")
    (tmp_path / "env" / "w.env").write_text("A=1\nnot an assignment\n", encoding="utf-8")
    result = run("up", "--json", "--ledger", "l.db", cwd=tmp_path)
    assert result.returncode in (1, 2), result.stderr
    doc = failure_doc(result.stdout)
    assert doc["exit_code"] == result.returncode and "w.env" in doc["error"]
    assert "w.env" in one_line(result.stderr)


#: A server whose every answer is an HTML 404 page and whose every log line is rich markup.
HTML_404_SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_error(404)
    def log_message(self, *args):
        sys.stderr.write("[/x] [bold]boom\\n")
        sys.stderr.flush()
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_up_failure_prints_once_as_text_without_raw_html(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "server.py").write_text(HTML_404_SERVER, encoding="utf-8")
    start = f"exec {sys.executable} {tmp_path / 'server.py'} {port}"
    generic_spec(tmp_path, port, start, ready_timeout_s="2", start_timeout_s="1")
    for json_flag in ((), ("--json",)):
        result = run("up", *json_flag, "--ledger", "l.db", cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        err = result.stderr
        assert "Traceback" not in err and "MarkupError" not in err
        assert err.count("not ready after") == 1, err
        assert "[/x] [bold]boom" in err
        assert "<html" not in err.lower() and "<!doctype" not in err.lower(), err
        assert "HTTP 404" in err and "Error response" in err
        if json_flag:
            assert "not ready after" in failure_doc(result.stdout)["error"]


def test_untrusted_readiness_bodies_print_as_text(tmp_path: Path) -> None:
    port = free_port()
    www = tmp_path / "www"
    www.mkdir()
    (www / "health").write_text("[/x] [bold]ready", encoding="utf-8")
    start = f"exec {sys.executable} -m http.server {port} --bind 127.0.0.1 --directory {www}"
    generic_spec(tmp_path, port, start, ready_timeout_s="20", start_timeout_s="1")
    try:
        up = run("up", "--ledger", "l.db", cwd=tmp_path)
        assert up.returncode == 0, up.stderr
        status = run("status", cwd=tmp_path)
        assert status.returncode == 0, status.stderr
        assert "[/x] [bold]ready" in status.stdout
    finally:
        down = run("down", "--ledger", "l.db", cwd=tmp_path)
    assert down.returncode == 0, down.stderr
