"""SIGTERM (``kill``, systemd, a CI runner's timeout) and SIGHUP (a terminal that went away) end a
command exactly as Ctrl-C does, for each command whose SIGINT is tested (``up``, ``restart``,
``bench``, ``soak``): the same cleanup, record and hint, and exit 128 + the signal (143, 129)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.bench.record import BenchRunRecord
from servelab.core.deploy.record import DeploymentRecord
from servelab.core.soak.record import SoakRunRecord
from servelab.io.ledger.ledger import Ledger
from tests.support import free_ports, run_cli
from tests.support.generic import generic_service, servelab_process, text_or_empty
from tests.support.processes import default_stop_signals, listening, live_procs_under
from tests.support.servers import SEEN, Seen, served, streaming_app

SIGNALS = [signal.SIGTERM, signal.SIGHUP]


@pytest.fixture(params=SIGNALS, ids=lambda s: signal.Signals(s).name)
def signum(request: pytest.FixtureRequest) -> int:
    return int(request.param)


def _said(signum: int) -> str:
    return f"interrupted by {signal.Signals(signum).name}"


def _signal_when(proc: subprocess.Popen[bytes], record: Path, before: str, signum: int) -> str:
    """``signum`` once ``record`` (a pid record) holds a new launch; the process's stderr. The
    process is killed if that never happens (never left running: its pipes would be reported
    in a later test)."""
    try:
        deadline = time.monotonic() + 120  # a loaded machine starts Python slowly
        while text_or_empty(record) in ("", before):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signum, err
    return " ".join(err.decode().split())


def test_up_stops_what_it_started_and_records_it(tmp_path: Path, signum: int) -> None:
    good, slow = free_ports(2)
    (tmp_path / "servelab.toml").write_text(
        'name = "t"\nstate_dir = "state"\n'
        + generic_service("good", good, 'ready_path = "/"\n')
        + generic_service("slow", slow, 'ready_path = "/missing"\ndepends_on = ["good"]\n')
    )
    proc = servelab_process(tmp_path, "up")
    err = _signal_when(proc, tmp_path / "state" / "run" / "slow.json", "", signum)
    assert "up interrupted; stopped what this run started: slow, good" in err
    assert _said(signum) in err and "Traceback" not in err
    assert live_procs_under(tmp_path) == []
    assert not listening(good) and not listening(slow)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        row = ledger.list(DeploymentRecord)[-1]
    assert row.action == "up" and row.detail["stopped"] == ["slow", "good"]
    assert row.detail["interrupted"] is True


@pytest.fixture
def deployed(tmp_path: Path) -> Iterator[Path]:
    """``a`` and ``b`` (which depends on it) up; ``a``'s readiness then fails (its marker gone);
    everything down after the test."""
    a, b = free_ports(2)
    spec = tmp_path / "servelab.toml"
    spec.write_text(
        'name = "t"\nstate_dir = "state"\n'
        + generic_service("a", a, 'ready_path = "/ready-a"\n')
        + generic_service("b", b, 'ready_path = "/"\ndepends_on = ["a"]\n')
    )
    (tmp_path / "ready-a").write_text("ok")
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    try:
        assert run_cli("up", "-f", str(spec), env=env).returncode == 0
        (tmp_path / "ready-a").unlink()
        yield spec
    finally:
        run_cli("down", "-f", str(spec), env=env)
    assert live_procs_under(tmp_path) == []
    assert not listening(a) and not listening(b)


def test_restart_says_what_is_down_and_how_to_bring_it_back(
    tmp_path: Path, deployed: Path, signum: int
) -> None:
    record = tmp_path / "state" / "run" / "a.json"
    before = record.read_text()
    proc = servelab_process(tmp_path, "restart", "a", "-f", str(deployed), "--no-verify")
    err = _signal_when(proc, record, before, signum)
    assert f"restart interrupted; down: a, b; bring them back with: servelab up -f {deployed}" in (
        err
    )
    assert _said(signum) in err
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        row = ledger.list(DeploymentRecord)[-1]
    assert row.action == "restart" and row.detail["down"] == ["a", "b"]
    assert row.detail["recovery"] == f"servelab up -f {deployed}"
    assert (tmp_path / "state" / "lock").read_bytes() == b""  # released: nobody named


async def _until_streaming(proc: asyncio.subprocess.Process, streams: int, seen: Seen) -> None:
    deadline = time.monotonic() + 30
    while seen.streams < streams:
        assert time.monotonic() < deadline and proc.returncode is None, "it never streamed"
        await asyncio.sleep(0.05)


async def _start(tmp_path: Path, *args: str) -> asyncio.subprocess.Process:
    env = {k: v for k, v in os.environ.items() if k != "SERVELAB_LEDGER"}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "servelab", *args, cwd=tmp_path, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        preexec_fn=default_stop_signals,
    )  # fmt: skip


async def test_bench_shows_and_saves_its_partial_run(tmp_path: Path, signum: int) -> None:
    ledger = tmp_path / "l.db"
    app = streaming_app(gap_s=0.5)
    async with served(app) as url:
        proc = await _start(
            tmp_path, "bench", "--url", url, "--concurrency", "2", "--requests", "4",
            "--output-len", "50", "--ledger", str(ledger), "--json",
        )  # fmt: skip
        await _until_streaming(proc, 2, app[SEEN])  # the run is under way
        proc.send_signal(signum)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 128 + signum, err.decode()
    assert f"{_said(signum)}: partial results shown and saved" in err.decode()
    assert b"Traceback" not in err
    assert json.loads(out)["interrupted"] is True
    with Ledger.open(ledger) as led:
        assert len(led.list(BenchRunRecord)) == 1


async def test_soak_records_what_it_did(tmp_path: Path, signum: int) -> None:
    ledger = tmp_path / "l.db"
    app = streaming_app(gap_s=0.2)
    async with served(app) as url:
        proc = await _start(
            tmp_path, "soak", "--url", url, "--sessions", "2", "--rounds", "1000",
            "--max-tokens", "4", "--duration", "60", "--no-localize", "--ledger", str(ledger),
        )  # fmt: skip
        await _until_streaming(proc, 3, app[SEEN])  # a session is in its second round
        proc.send_signal(signum)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 128 + signum, err.decode()
    assert _said(signum) in err.decode() and b"Traceback" not in err
    with Ledger.open(ledger) as led:
        (soak,) = led.list(SoakRunRecord)
    assert soak.result.interrupted is True and soak.ok is False
