"""Shared test support: free loopback ports, the repository's paths, running the CLI for real."""

from __future__ import annotations

import asyncio
import os
import random
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.support import forkcli

__all__ = [
    "CLI_COUNT_ENV", "REFERENCE_PORTS", "REPO", "arun_cli", "free_port", "free_ports", "run_cli",
]  # fmt: skip

REPO = Path(__file__).resolve().parents[2]


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


# Ports are drawn BELOW the kernel's ephemeral range: a port the OS picked for bind(0) can be handed
# to an outgoing connection (a router's health check, a client) before the service binds it, which
# made tests flaky under load. Below the range only explicit binds compete.
_LOW, _HIGH = 15000, _ephemeral_low() - 1
_rng = random.Random(os.getpid())

#: The reference deployment's ports (prefill 30000, router 30001, decode 30002, bootstrap 8998, and
#: their neighbours 29000, 30003): a real deployment on this machine may hold them, so a test never
#: draws one, even when it is free at the moment.
REFERENCE_PORTS = frozenset({8998, 29000, 30000, 30001, 30002, 30003})


def _draw() -> int:
    return _rng.randint(_LOW, _HIGH)


def _bindable(port: int) -> socket.socket | None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        return None
    return sock


def free_ports(n: int, *, draw: Callable[[], int] = _draw) -> list[int]:
    """``n`` distinct ports on 127.0.0.1, free a moment ago, outside the ephemeral range and
    never one of :data:`REFERENCE_PORTS`; ``draw`` proposes candidates (seeded random ones)."""
    held: list[socket.socket] = []
    try:
        while len(held) < n:
            candidate = draw()
            if candidate in REFERENCE_PORTS:
                continue
            sock = _bindable(candidate)
            if sock is not None:
                held.append(sock)
        return [int(s.getsockname()[1]) for s in held]
    finally:
        for sock in held:
            sock.close()


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago, outside the ephemeral range and the
    reference ports."""
    return free_ports(1)[0]


#: Set to a file's path, every :func:`run_cli` call appends a line to it: the CPU seconds of the
#: process (exec'd: its user + system time, as ``RUSAGE_CHILDREN`` grew while it ran; forked:
#: the child's ``wait4`` rusage and the server's fork), its wall seconds and its first two
#: arguments, tab-separated (``benchmarks/cli_calls.py`` sums them); the fork server's start is
#: one more line, ``fork-server start``.
CLI_COUNT_ENV = "SERVELAB_TEST_CLI_COUNT"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _count(cpu: float, wall: float, words: str) -> None:
    if count := os.environ.get(CLI_COUNT_ENV):
        with open(count, "a", encoding="utf-8") as fh:  # one short line: appends do not interleave
            fh.write(f"{cpu:.4f}\t{wall:.4f}\t{words}\n")


def run_cli(
    *args: str,
    cwd: Path | None = None,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    unset: tuple[str, ...] = (),
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m servelab ARGS`` as a real process and capture its output: forked by the
    worker's fork server (``tests/support/forkcli.py``: the start and the imports skipped), or
    exec'd (``SERVELAB_TEST_FORK=0``, or a call the server cannot serve). Its environment is
    this process's without the names in ``unset``, with ``env`` over it; its stdin is this
    process's, or a pipe holding ``input`` (as ``subprocess.run(input=)``)."""
    full_env = {k: v for k, v in os.environ.items() if k not in unset}
    full_env.update(env or {})
    if forkcli.fork_enabled():
        srv, started = forkcli.server()
        if srv is not None and started:
            _count(srv.cpu, srv.wall, "fork-server start")
        if srv is not None and srv.serves(full_env):
            wall = time.perf_counter()
            forked = forkcli.run_forked(srv, list(args), cwd, full_env, timeout, input=input)
            _count(forked.cpu, time.perf_counter() - wall, " ".join(args[:2]))
            return forked.done
    cpu, wall = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "servelab", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        input=input,
    )
    _count(_children_cpu() - cpu, time.perf_counter() - wall, " ".join(args[:2]))
    return done


async def arun_cli(
    *args: str,
    cwd: Path | None = None,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    unset: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """:func:`run_cli` from an async test, in a thread: the test's loop (its loopback server)
    keeps running while the CLI runs."""
    return await asyncio.to_thread(run_cli, *args, cwd=cwd, timeout=timeout, env=env, unset=unset)
