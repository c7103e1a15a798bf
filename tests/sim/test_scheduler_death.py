"""A simulated engine whose scheduler dies never looks healthy (issue 38, defect 27): SGLang's
scheduler process logs "Scheduler hit an exception" and signals the server, which kills its
process tree (``docs/sim.md``, "When the scheduler dies"); the simulator logs the traceback,
answers 503, closes its connections and exits 1. Real worker processes on free loopback ports."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import free_ports
from tests.support.http import get_status, post, set_faults
from tests.support.stack import start_process, stop_process, wait_http


@dataclass
class Sim:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path


def _start(tmp_path: Path, role: str, *argv: str) -> Iterator[Sim]:
    port, side = free_ports(2)
    args = [sys.executable, "-m", "servelab", "sim", role, "--port", str(port), *argv]
    if role == "prefill":
        args += ["--bootstrap-port", str(side)]
    log = tmp_path / f"{role}.log"
    proc = start_process(args, log, env={"SERVELAB_SIM_TIME_SCALE": "0.01"})
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health", 60, proc)
        yield Sim(url, proc, log)
    finally:
        stop_process(proc)


@pytest.fixture
def small_pool(tmp_path: Path) -> Iterator[Sim]:
    yield from _start(tmp_path, "prefill", "--max-total-tokens", "64", "--page-size", "1")


def _generate(url: str, text: str, timeout: float = 20.0) -> int:
    body = {"text": text, "sampling_params": {"max_new_tokens": 2}}
    status, _ = post(url + "/generate", body, timeout=timeout)
    return status


def _words(prefix: str, n: int) -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


def test_a_full_pool_never_evicts_a_matched_prefix_and_kills_the_scheduler(
    small_pool: Sim,
) -> None:
    """Defect 27: with the KV pool full of two sessions' pages, a prompt extending the older
    session evicted its own matched prefix, the scheduler died of KeyError and every later
    request hung while /health stayed 200."""
    assert _generate(small_pool.url, _words("a", 30)) == 200
    assert _generate(small_pool.url, _words("b", 30)) == 200
    assert _generate(small_pool.url, f"{_words('a', 30)} {_words('c', 10)}") == 200
    assert _generate(small_pool.url, _words("d", 20)) == 200  # the scheduler still serves
    assert get_status(small_pool.url + "/health") == 200
    stop_process(small_pool.proc)
    assert "Traceback" not in small_pool.log.read_text()


def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the worker still runs {timeout} s after its scheduler died")


@pytest.mark.parametrize(
    ("role", "argv"),
    [("prefill", ()), ("decode", ()), ("decode", ("--engine", "vllm"))],
    ids=["sglang-prefill", "sglang-decode", "vllm-decode"],
)
def test_a_dead_scheduler_logs_its_traceback_closes_and_exits_nonzero(
    tmp_path: Path, role: str, argv: tuple[str, ...]
) -> None:
    """Defect 27: a scheduler loop that dies leaves no healthy-looking engine: the traceback is
    logged as SGLang logs it, the server closes, /health stops answering 200 and the process
    exits 1 (on main the loop died silently and /health stayed 200)."""
    for sim in _start(tmp_path, role, "--admin", *argv):
        set_faults(sim.url, scheduler_crash=True)
        assert _wait_exit(sim.proc, 15) == 1
        assert get_status(sim.url + "/health", timeout=2) != 200
        log = sim.log.read_text()
        assert "Scheduler hit an exception" in log and "Traceback" in log
        assert "the scheduler died" in log
