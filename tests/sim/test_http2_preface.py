"""The router's HTTP/2 probe leaves no traceback in a simulated worker's log (issue 38, defect
28): at start-up the router probes each worker over HTTP and over gRPC at once, and the gRPC
probe's HTTP/2 preface made aiohttp log ``BadHttpMessage: Pause on PRI/Upgrade`` with a
traceback, twice per start. Real processes: the real router, the simulated workers."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from tests.support import free_ports
from tests.support.stack import sim_stack, start_process, stop_process, wait_http

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#: an empty SETTINGS frame, as an HTTP/2 client sends right after the preface
_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def test_a_stack_start_leaves_no_traceback_in_the_workers_logs(tmp_path: Path) -> None:
    """Defect 28: each start of the router logged two aiohttp tracebacks per worker."""
    with sim_stack(log_dir=tmp_path) as stack:
        wait_http(stack.router_url + "/readiness", 60, stack.procs["router"])
    for name in ("prefill", "decode"):
        log = (tmp_path / f"{name}.log").read_text()
        assert "servelab sim" in log
        assert "Traceback" not in log and "PRI/Upgrade" not in log, log


def test_an_http2_preface_is_answered_400_and_logged_quietly(tmp_path: Path) -> None:
    """Defect 28: the preface is refused as an HTTP/1.1 server refuses it (400), and only that
    one is quiet: the worker keeps serving."""
    port, side = free_ports(2)
    argv = [sys.executable, "-m", "servelab", "sim", "prefill", "--port", str(port)]
    log = tmp_path / "prefill.log"
    proc = start_process([*argv, "--bootstrap-port", str(side)], log)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", 60, proc)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.sendall(_PREFACE + _SETTINGS)
            answer = conn.recv(4096)
        assert answer.split(b" ", 2)[1] == b"400", answer
        wait_http(f"http://127.0.0.1:{port}/health", 10, proc)
    finally:
        stop_process(proc)
    assert "Traceback" not in log.read_text()
