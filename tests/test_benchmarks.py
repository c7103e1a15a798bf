"""The benchmarks' own parts, run for real: every script starts (``--help``), and the truth server
the client benchmarks are judged by streams on its schedule and stamps each request's arrival
with the kernel's receive time. The benchmarks' figures themselves are not checked here (they are
measurements, docs/bench.md)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.load import metrics
from servelab.core.load.records import RequestRecord
from servelab.io.http.stream import StreamClient
from tests.support import free_port

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_benchmark_starts(script: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage" in done.stdout.lower()


def _get(url: str, method: str = "GET") -> dict[str, object]:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


@pytest.fixture
def truth_url() -> Iterator[str]:
    port = free_port()
    script = BENCHMARKS / "peers" / "truth_server.py"
    cmd = [sys.executable, str(script), "--port", str(port), "--gap-ms", "5", "--prefill-ms", "30"]
    server = subprocess.Popen(cmd)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(url + "/v1/models")
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "did not start"
                time.sleep(0.05)
        yield url
    finally:
        server.terminate()
        server.wait(10)


async def test_the_truth_server_streams_on_schedule_from_the_kernel_arrival(
    truth_url: str,
) -> None:
    body = json.dumps(
        {
            "model": "truth",
            "stream": True,
            "max_tokens": 6,
            "messages": [{"role": "user", "content": "one two three"}],
        }
    ).encode()
    records = []
    async with StreamClient(truth_url, concurrency=2) as client:
        for index in range(4):
            record = RequestRecord(index, time.perf_counter_ns())
            records.append(await client.stream("/v1/chat/completions", body, record))
    assert all(r.ok and r.output_tokens == 6 for r in records), [r.error for r in records]
    got = _get(truth_url + "/truth?last=4")
    assert got["requests"] == 4 and got["tokens"] == 24
    assert got["unstamped"] == 0  # every arrival is the kernel's stamp
    wait = got["socket_wait_ms"]
    assert isinstance(wait, dict) and wait["n"] == 4 and wait["max"] >= 0
    ttft = got["ttft_ms"]
    # the first token after the prefill: uvloop's timers have millisecond resolution and fire
    # up to 1 ms early (see ops/benchload.sleep_until), hence the 1 ms tolerance
    assert isinstance(ttft, dict) and ttft["p50"] >= 29.0
    # every client TTFT holds the server's schedule: the first token, due 30 ms after the arrival
    # (its send precedes it), never reached the client sooner. Compared with that condition in the
    # client's own clock, not with the server's TTFT: the server stamps its first token after its
    # write returns, in another process, which a busy machine can delay past the client's read
    # (a fresh clone under load: client max 31.4 ms, server max 35.4 ms).
    client_ttft = sorted((metrics.ttft_ns(r) or 0) / 1e6 for r in records)
    assert len(client_ttft) == 4 and all(t >= 29.0 for t in client_ttft), client_ttft
    gaps, late = got["gap_ms"], got["late_ms"]
    assert isinstance(gaps, dict) and gaps["n"] == 20
    # the gaps hold the 5 ms schedule unless the server itself fell behind it (a loaded machine:
    # the tokens that came due while it was late go out at once), which its own record says
    assert isinstance(late, dict) and (gaps["p50"] >= 4.0 or late.get("max", 0.0) >= 4.0), (
        gaps,
        late,
    )
    assert _get(truth_url + "/truth/reset", "POST") == {"ok": True}
    assert _get(truth_url + "/truth")["requests"] == 0


def test_cli_startup_measures_with_bytecode_cached_as_the_suite_runs(tmp_path: Path) -> None:
    """benchmarks/cli_startup.py measures what the suite pays: its processes write and reuse
    bytecode even when the outer environment sets ``PYTHONDONTWRITEBYTECODE`` (the Makefile
    and tests/conftest.py drop it for the suite), so a tree without ``__pycache__`` gets one."""
    src = tmp_path / "src"
    shutil.copytree(
        Path(__file__).resolve().parents[1] / "src",
        src,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    assert not list(src.rglob("__pycache__"))
    script = [sys.executable, str(BENCHMARKS / "cli_startup.py"), "--runs", "1"]
    done = subprocess.run(
        [*script, "--only=--help", "--src", f"copy={src}"],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "bytecode cached" in done.stdout
    assert list((src / "servelab" / "cli" / "__pycache__").glob("boundary.*.pyc"))
    assert done.stdout.count("\n--help ") == 1, done.stdout


def test_sim_calibration_reads_a_process_user_and_system_cpu_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``sim_calibration.py --side-by-side`` prints the system part of the decode's CPU per
    token (the kernel's side of its sends): ``_cpu_s`` reads a live process's user and system
    seconds apart, as the process itself counts them."""
    spec = importlib.util.spec_from_file_location(
        "sim_calibration", BENCHMARKS / "sim_calibration.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look themselves up
    spec.loader.exec_module(module)
    burn = (
        "import os, sys, time\n"
        "end = time.monotonic() + 0.4\n"
        "while time.monotonic() < end:\n"  # bounded in time: system calls, then pure Python
        "    os.stat('/')\n"
        "end = time.monotonic() + 0.4\n"
        "while time.monotonic() < end:\n"
        "    sum(range(1000))\n"
        "t = os.times()\n"
        "print(t.user, t.system, flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", burn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        own_user, own_system = (float(x) for x in child.stdout.readline().split())
        user, system = module._cpu_s(child.pid)
    finally:
        child.communicate("", timeout=30)
    tick = 2 / os.sysconf("SC_CLK_TCK")
    assert own_system > tick and own_user > tick, (own_user, own_system)
    assert abs(user - own_user) <= tick and abs(system - own_system) <= tick, (
        (user, system),
        (own_user, own_system),
    )
