"""``python -m servelab bench`` as a real process against a loopback streaming server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp import web

from servelab.cli.bench import Exporter
from servelab.core.bench.contract import BenchConfig, RunResult
from servelab.core.bench.record import BenchRunRecord
from servelab.core.load.workload import LengthDist
from servelab.core.options import parse_concurrency, parse_length
from servelab.io.ledger.ledger import Ledger
from servelab.ops.bench.bench import run_bench
from tests.support import REPO, arun_cli, run_cli
from tests.support.servers import SEEN, served, streaming_app
from tests.support.stack import sim_stack


async def _start(*args: str, cwd: Path) -> asyncio.subprocess.Process:
    """``python -m servelab bench ARGS`` as a real process, its ledger not taken from the env."""
    env = {k: v for k, v in os.environ.items() if k != "SERVELAB_LEDGER"}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "servelab",
        "bench",
        *args,
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _cli(*args: str, cwd: Path) -> tuple[int, str, str]:
    done = await arun_cli("bench", *args, cwd=cwd, unset=("SERVELAB_LEDGER",), timeout=60)
    return done.returncode, done.stdout, done.stderr


def _bench_runs(ledger: Path) -> int:
    with sqlite3.connect(ledger) as conn:
        return int(conn.execute("SELECT count(*) FROM bench_runs").fetchone()[0])


async def test_bench_json_export_and_ledger(tmp_path: Path) -> None:
    async with served(streaming_app(gap_s=0.001)) as url:
        code, out, err = await _cli(
            "--url",
            url,
            "--concurrency",
            "2,4",
            "--requests",
            "8",
            "--input-len",
            "16",
            "--output-len",
            "4",
            "--warmup",
            "2",
            "--json",
            "--ledger",
            str(tmp_path / "l.db"),
            "--export",
            str(tmp_path / "out"),
            cwd=tmp_path,
        )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["config"]["model"] == "sim-model"
    assert [lv["concurrency"] for lv in doc["levels"]] == [2, 4]
    level = doc["levels"][0]
    assert (level["ok"], level["failed"], level["failures"]) == (8, 0, {})
    assert level["output_throughput"]["mean"] > 0
    assert level["gap_ms"]["n"] == 8 * 3
    assert level["client"]["cpu_ms_per_token"] > 0
    assert _bench_runs(tmp_path / "l.db") == 2
    for name in ("summary.md", "summary.csv", "records.jsonl", "result.json"):
        assert (tmp_path / "out" / name).stat().st_size > 0


async def test_spec_entry_point_is_the_target_and_holds_the_ledger(tmp_path: Path) -> None:
    async with served(streaming_app(gap_s=0.001)) as url:
        spec = tmp_path / "servelab.toml"
        spec.write_text(
            f'name = "t"\nstate_dir = "state"\n\n[services.router]\nrole = "router"\n'
            f'url = "{url}"\nstart = "true"\n',
            encoding="utf-8",
        )
        code, out, err = await _cli("-f", str(spec), "--requests", "3", "--json", cwd=tmp_path)
    assert code == 0, err
    assert json.loads(out)["config"]["url"] == url
    assert _bench_runs(tmp_path / "state" / "ledger.db") == 1


def _hanging_up_app() -> web.Application:
    """Lists a model, then drops every completion's connection without an answer."""

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})

    async def hang_up(request: web.Request) -> web.Response:
        await request.read()
        assert request.transport is not None
        request.transport.close()
        return web.Response()

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", hang_up)
    return app


async def test_failed_requests_exit_1_and_say_why(tmp_path: Path) -> None:
    async with served(_hanging_up_app()) as url:
        code, out, err = await _cli(
            "--url", url, "--requests", "3", "--model", "m", "--no-ledger", cwd=tmp_path
        )
    assert code == 1
    assert "3 failed (3 connection error)" in err
    # and what one of them was (issue 38, 34th pass: the count alone said nothing)
    assert re.search(
        r"failed: C1: e\.g\. request \d+ \(connection error\): connection closed", err
    ), err
    assert "C1" in out


async def test_ctrl_c_exits_cleanly_with_partial_results_saved(tmp_path: Path) -> None:
    ledger = tmp_path / "l.db"
    app = streaming_app(gap_s=0.5)
    async with served(app) as url:
        proc = await _start(
            "--url",
            url,
            "--concurrency",
            "2",
            "--requests",
            "4",
            "--output-len",
            "50",
            "--ledger",
            str(ledger),
            "--json",
            cwd=tmp_path,
        )
        # both C2 streams begun: the run is under way, so its SIGINT handler is installed (a
        # SIGINT before it would be a plain KeyboardInterrupt, with nothing saved)
        deadline = time.monotonic() + 30
        while app[SEEN].streams < 2:
            assert time.monotonic() < deadline and proc.returncode is None, "bench never streamed"
            await asyncio.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 130, err.decode()
    assert b"Traceback" not in err
    assert json.loads(out)["interrupted"] is True
    assert _bench_runs(ledger) == 1


def _finished_runs(ledger: Path) -> int:
    """Bench run rows committed so far (0 while the file or its schema is not there yet)."""
    if not ledger.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(ledger, timeout=5)) as conn:
            return int(conn.execute("SELECT count(*) FROM bench_runs").fetchone()[0])
    except sqlite3.OperationalError:  # created, its schema not yet committed
        return 0


def _bench_argv(url: str, ledger: Path, requests: int) -> list[str]:
    argv = [sys.executable, "-m", "servelab", "bench", "--url", url, "--concurrency", "2,4"]
    argv += ["--requests", str(requests), "--output-len", "256", "--ledger", str(ledger), "--json"]
    return argv


def test_kill_9_of_the_real_bench_keeps_every_finished_run(tmp_path: Path) -> None:
    ledger, requests = tmp_path / "l.db", 12
    with sim_stack(time_scale=0.05) as st, (tmp_path / "bench.err").open("wb") as err:
        proc = subprocess.Popen(
            _bench_argv(st.router_url, ledger, requests),
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 90
            while _finished_runs(ledger) < 1:  # the C2 run is committed: C4 is under way
                assert time.monotonic() < deadline and proc.poll() is None, "no run committed"
                time.sleep(0.02)
            os.killpg(proc.pid, signal.SIGKILL)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert proc.returncode == -signal.SIGKILL, (tmp_path / "bench.err").read_text()
    with contextlib.closing(sqlite3.connect(ledger)) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = dict(raw.execute("SELECT run_id, count(*) FROM bench_records GROUP BY run_id"))
    with Ledger.open(ledger) as opened:
        runs = opened.list(BenchRunRecord)
        assert [run.summary["concurrency"] for run in runs] in ([2], [2, 4])
        for run in runs:  # every finished run whole: its row and all its records
            assert not run.summary["interrupted"]
            assert run.n_records == requests and stored[run.id] == requests
            full = opened.get(BenchRunRecord, run.id)
            assert full is not None and full.records is not None
            assert len(full.records) == requests


def test_bad_input_exits_2() -> None:
    result = run_cli("bench", "--concurrency", "0,x", "--no-ledger", cwd=REPO)
    assert result.returncode == 2
    assert "concurrency" in result.stderr.lower()


def test_option_parsers() -> None:
    assert parse_concurrency("64,80,96") == (64, 80, 96)
    assert parse_length("uniform:128:32").kind == "uniform"
    assert parse_length("64").value == 64


class _Crash(Exception):
    pass


async def test_export_is_written_after_every_run_so_a_crash_keeps_run_1(tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = BenchConfig(
        url="",
        concurrencies=(2, 4),
        requests=6,
        input_len=LengthDist("fixed", 8),
        output_len=LengthDist("fixed", 3),
        model="sim-model",
    )
    async with served(streaming_app(gap_s=0.001)) as url:
        config = replace(config, url=url)
        export = Exporter(out, config)

        def save_then_crash(run: RunResult) -> None:
            export(run)
            raise _Crash("the process dies after the first run")

        with Ledger.open(tmp_path / "l.db") as ledger, pytest.raises(_Crash):
            await run_bench(config, ledger=ledger, save=save_then_crash)
    assert _bench_runs(tmp_path / "l.db") == 1
    doc = json.loads((out / "result.json").read_text())
    assert [lv["concurrency"] for lv in doc["levels"]] == [2]
    assert doc["levels"][0]["requests"] == 6
    records = (out / "records.jsonl").read_text().splitlines()
    assert len(records) == 6
    assert "C2" in (out / "summary.md").read_text()
    assert len((out / "summary.csv").read_text().splitlines()) == 2
    assert sorted(p.name for p in out.iterdir()) == [
        "records.jsonl",
        "result.json",
        "summary.csv",
        "summary.md",
    ]
