"""A real forward proxy for the tests: tinyproxy (Debian's package) as a plain process.

It runs in the foreground (``-d``) in its own process group with its own config and pid file
under the test's directory, on a free loopback port, logging to its output: never the system
service. Agents reach the router through it as their ``HTTP_PROXY``/``HTTPS_PROXY`` says (an
``http://`` target in the absolute form). ``Timeout`` is its idle timeout, in whole seconds: a
request whose answer sends no byte for that long is dropped (the connection closed, nothing
answered), so a long uncached prefill in front of a short timeout is cut. Its absence fails the
test in CI or as root and skips it for a developer without root (:mod:`.sysdeps`).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from servelab.sim.settings import ENV_WARMUP_S
from tests.support import free_port
from tests.support.proxies import SLOW_PREFILL_ARGS, STACK_SCALES
from tests.support.stack import SimStack, sim_stack, start_process, stop_process
from tests.support.sysdeps import missing

__all__ = [
    "FORWARD_SOAK",
    "NO_ENV_PROXY",
    "ForwardProxy",
    "running_tinyproxy",
    "slow_prefill_stack",
    "tinyproxy_binary",
    "tinyproxy_config",
]

#: The proxy variables emptied: a soak takes only the path its test sets.
NO_ENV_PROXY = {"NO_PROXY": "", "no_proxy": "", "HTTPS_PROXY": "", "https_proxy": "",
                "HTTP_PROXY": "", "http_proxy": "", "ALL_PROXY": "", "all_proxy": ""}  # fmt: skip
#: One session of three rounds, each adding 600 words: on the slow stack the third round's
#: prompt (13 KB) waits past tinyproxy's one-second timeout for its first byte. No answer probes:
#: on the slow stack each waits seconds on an answer none of the tests checks.
FORWARD_SOAK = ("--sessions", "1", "--rounds", "3", "--idle-timeout", "8", "--duration", "90",
                "--max-tokens", "4", "--fresh-context", "short:600,long:600", "--answer-probes",
                "0", "--no-ledger", "--json")  # fmt: skip


@contextlib.contextmanager
def slow_prefill_stack() -> Iterator[SimStack]:
    """The slow stack without the prefill's prefix cache: a growing history's first token waits
    for its whole prompt (what a proxy's timeout needs to be met)."""
    with sim_stack(
        time_scale=STACK_SCALES["slow"], env={ENV_WARMUP_S: "0"}, prefill_args=SLOW_PREFILL_ARGS
    ) as stack:
        yield stack


def tinyproxy_binary() -> str:
    """The path of tinyproxy (Debian installs it in /usr/bin), else :func:`missing`."""
    found = shutil.which("tinyproxy") or shutil.which("tinyproxy", path="/usr/sbin:/usr/bin")
    if found is None:
        missing("tinyproxy is not installed (no tinyproxy on PATH)")
    return found


@dataclass(frozen=True)
class ForwardProxy:
    """A running forward proxy: its URL (what ``HTTP_PROXY`` names), port and log."""

    url: str
    port: int
    log: Path


def tinyproxy_config(
    workdir: Path, port: int, *, timeout_s: int = 600, max_clients: int = 100
) -> str:
    """tinyproxy's whole config: loopback only, ``timeout_s`` idle timeout, at most
    ``max_clients`` connections, its pid file under ``workdir``, logging to its output."""
    lines = [
        f"Port {port}",
        "Listen 127.0.0.1",
        "Allow 127.0.0.1",
        f"Timeout {timeout_s}",
        f"MaxClients {max_clients}",
        "LogLevel Info",
        f'PidFile "{workdir / "tinyproxy.pid"}"',
        "DisableViaHeader Yes",
    ]
    return "\n".join(lines) + "\n"


def _wait(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 30.0) -> None:
    """Until the proxy accepts a connection."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"tinyproxy exited ({proc.returncode}): {log.read_text()[-1500:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"tinyproxy on port {port} not listening after {timeout:g} s")
        time.sleep(0.05)


@contextlib.contextmanager
def running_tinyproxy(
    workdir: Path, *, timeout_s: int = 600, max_clients: int = 100
) -> Iterator[ForwardProxy]:
    """tinyproxy started with its own config under ``workdir``, stopped (by process group) at the
    end."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = workdir / "tinyproxy.conf"
    conf.write_text(tinyproxy_config(workdir, port, timeout_s=timeout_s, max_clients=max_clients))
    log = workdir / "tinyproxy.log"
    proc = start_process([tinyproxy_binary(), "-d", "-c", str(conf)], log)
    try:
        _wait(port, proc, log)
        yield ForwardProxy(f"http://127.0.0.1:{port}", port, log)
    finally:
        stop_process(proc)
