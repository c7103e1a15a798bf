"""``restart --rolling`` for real: the 2P2D example (two simulated prefills, two simulated decodes,
the real sglang-router) on free ports, under a running closed-loop bench."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter_ns
from typing import Any

import pytest

from servelab.core.bench.contract import BenchConfig, BenchProgress, BenchResult
from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.deploy.record import DeploymentRecord
from servelab.core.deploy.rolling import RollOptions, RollPhase, running_requests
from servelab.core.ledger.codec import encode
from servelab.core.load.records import REASON_INTERRUPTED, RequestRecord
from servelab.core.load.workload import LengthDist
from servelab.errors import RouterApiError
from servelab.io.http.client import chat_body, get_json
from servelab.io.http.stream import StreamClient
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import load_spec
from servelab.ops.bench.bench import run_bench
from servelab.ops.context import Operation
from servelab.ops.deploy import deploy
from servelab.ops.deploy.rolling import rolling_restart
from servelab.ops.deploy.rolling_results import RollingReport
from servelab.ops.knob import diff_knob, set_knob
from servelab.report.deploy import render_rolling, rolling_json
from tests.support.processes import listening
from tests.support.xpyd import write_2p2d_spec

DECODES = ("decode-1", "decode-2")


@dataclass(frozen=True)
class _Windows:
    """Completed tokens per second in the three windows around the roll, and the worst second."""

    before: float
    during: float
    after: float
    worst_during: float


def _tokens_per_second(
    records: Sequence[RequestRecord], t0: int, roll: tuple[int, int], t_end: int
) -> _Windows:
    buckets: dict[int, int] = {}
    for record in records:
        for at, n in zip(record.event_ns, record.event_tokens, strict=True):
            buckets[(at - t0) // 1_000_000_000] = buckets.get((at - t0) // 1_000_000_000, 0) + n
    start, end = ((x - t0) // 1_000_000_000 for x in roll)
    last = (t_end - t0) // 1_000_000_000

    def mean(lo: int, hi: int) -> float:
        seconds = range(lo, hi)
        return sum(buckets.get(s, 0) for s in seconds) / max(len(seconds), 1)

    print("completed tokens per second:", [buckets.get(s, 0) for s in range(last + 1)])
    print(f"roll from second {start} to {end}")
    worst = min((buckets.get(s, 0) for s in range(start, end + 1)), default=0)
    first = min(buckets, default=0) + 1  # the first whole second of traffic
    return _Windows(mean(first, start), mean(start, end + 1), mean(end + 1, last), float(worst))


async def _bench_during_roll(
    op: Operation, knob: str
) -> tuple[RollingReport, BenchResult, int, _Windows]:
    for name in DECODES:
        await set_knob(op, name, DEFAULT_KNOB, knob, reason="rolling test")
    router = await op.url("router")
    config = BenchConfig(
        url=router, concurrencies=(8,), requests=6000, model="servelab-sim",
        input_len=LengthDist("fixed", 256), output_len=LengthDist("fixed", 48),
    )  # fmt: skip
    stop, going = asyncio.Event(), asyncio.Event()

    def progress(event: BenchProgress) -> None:
        if event.phase == "run" and event.done >= 20:
            going.set()

    t0 = perf_counter_ns()
    bench = asyncio.create_task(run_bench(config, stop=stop, progress=progress))
    await asyncio.wait_for(going.wait(), 60)
    await asyncio.sleep(5.0)
    roll_start = perf_counter_ns()
    report = await rolling_restart(op, ["decode"], options=RollOptions(drain_timeout_s=60))
    roll_end = perf_counter_ns()
    await asyncio.sleep(4.0)
    stopped = perf_counter_ns()
    stop.set()
    result = await bench
    records = result.runs[0].records
    return report, result, stopped, _tokens_per_second(records, t0, (roll_start, roll_end), stopped)


@pytest.mark.timeout(300)
def test_rolling_restart_of_both_decodes_under_a_bench_loses_no_request(tmp_path: Path) -> None:
    spec_path, ports = write_2p2d_spec(tmp_path)
    loaded = load_spec(spec_path)

    async def scenario() -> tuple[RollingReport, BenchResult, int, _Windows, dict[str, str]]:
        with Ledger.open(tmp_path / "ledger.db") as ledger:
            async with Operation(loaded, ledger=ledger) as op:
                up = await deploy.up(op)
                assert up.ok, encode(up)
                try:
                    report, result, stopped, windows = await _bench_during_roll(op, "256")
                    live = {}
                    for name in DECODES:  # the knob in each restarted process's environment
                        live[name] = str((await diff_knob(op, name, DEFAULT_KNOB)).live)
                finally:
                    await deploy.down(op)
            rows = [
                row for row in ledger.list(DeploymentRecord) if row.action == "restart --rolling"
            ]
            assert len(rows) == 1 and rows[0].detail["ok"] is True
        return report, result, stopped, windows, live

    report, result, stopped, windows, live = asyncio.run(scenario())
    assert report.ok, render_rolling(report)
    assert [w.service for w in report.workers] == list(DECODES)
    for worker in report.workers:
        assert [phase.name for phase in worker.phases] == list(RollPhase)
        routed = encode(worker.phases[-1])
        assert routed["served_after"] > routed["served_before"]
        assert worker.verification is not None
        knobs = [c for c in worker.verification.layer("live") if c.knob == DEFAULT_KNOB]
        assert knobs and all(c.ok and c.live == "256" for c in knobs)
    assert live == {"decode-1": "256", "decode-2": "256"}  # the knob is live on both decodes
    assert result.interrupted  # the bench was still running when stopped: it covered the roll
    records = result.runs[0].records
    ended = [r for r in records if r.end_ns is not None and r.end_ns <= stopped]
    failed = [r for r in ended if not r.ok]
    cut = [r for r in records if r not in ended]
    assert len(ended) > 50 and failed == [], [(r.status, r.error, r.error_detail) for r in failed]
    # only the stop cut any request; one may still end well between the stop and its taking
    # effect
    assert all(
        r.error == REASON_INTERRUPTED or (r.ok and r.end_ns is not None and r.end_ns > stopped)
        for r in cut
    ), [(r.error, r.end_ns, stopped) for r in cut if r.error != REASON_INTERRUPTED]
    doc = json.loads(rolling_json(report))
    assert doc["ok"] and doc["out"] is None and doc["recovery"] == []
    assert windows.during > 0 and windows.after > 0
    print(
        f"\nrolling restart of 2 decodes under C8: {len(ended)} requests, {len(failed)} failed; "
        f"completed tokens/s before {windows.before:.0f}, during {windows.during:.0f} "
        f"(worst second {windows.worst_during:.0f}), after {windows.after:.0f}; "
        f"roll took {sum(p.elapsed_s for w in report.workers for p in w.phases):.1f}s"
    )
    print([(w.service, p.name, round(p.elapsed_s, 2)) for w in report.workers for p in w.phases])
    assert not any(listening(port) for port in ports)


@pytest.mark.timeout(200)
def test_a_failed_drain_stops_the_roll_and_says_how_to_put_the_worker_back(
    tmp_path: Path,
) -> None:
    spec_path, _ports = write_2p2d_spec(tmp_path)
    # round robin, as the streams below need (two on each decode): the example's env file sets
    # cache_aware last, under which four like prompts may all go to decode-2 ("decode-1 never
    # ran a request", once, beside a whole suite)
    router_env = tmp_path / "env" / "router-2p2d.env"
    text = router_env.read_text()
    assert "--policy cache_aware" in text
    router_env.write_text(text.replace("--policy cache_aware", "--policy round_robin"))
    loaded = load_spec(spec_path)

    async def scenario() -> tuple[RollingReport, RollingReport, list[str], list[RequestRecord]]:
        async with Operation(loaded) as op:
            assert (await deploy.up(op)).ok
            try:
                router = await op.url("router")
                # long streams through the router (round robin: two on each decode); decode-1
                # cannot drain within 0 s, and its streams still finish after it is removed
                async with StreamClient(router, concurrency=4) as client:
                    records = [RequestRecord(i, perf_counter_ns()) for i in range(4)]
                    body = chat_body("servelab-sim", "x " * 64, 6000)
                    streams = [
                        asyncio.create_task(client.stream("/v1/chat/completions", body, r))
                        for r in records
                    ]
                    await _running_on(await op.url("decode-1"))
                    failed = await rolling_restart(
                        op, ["decode-1"], options=RollOptions(drain_timeout_s=0.0)
                    )
                    listed = [w["url"] for w in await _workers(router)]
                    await asyncio.gather(*streams)
                again = await rolling_restart(op, ["decode-1"])
            finally:
                await deploy.down(op)
        return failed, again, listed, records

    failed, again, listed, records = asyncio.run(scenario())
    assert [(r.status, r.error, r.output_tokens) for r in records] == [(200, None, 6000)] * 4
    assert not failed.ok and failed.out == "decode-1" and not failed.down
    assert [p.name for p in failed.workers[0].phases] == ["remove", "drain"]
    assert loaded.spec.service("decode-1").url not in listed  # it really was out
    text = render_rolling(failed)
    assert (
        "decode-1 is out of the router; put it back with: servelab restart --rolling decode-1"
        in text
    )
    assert "request(s) still running after 0.0s" in text
    doc = json.loads(rolling_json(failed))
    assert doc["out"] == "decode-1" and doc["recovery"][0].startswith("servelab restart --rolling")
    assert "POST" in doc["recovery"][1] and '"worker_type": "decode"' in doc["recovery"][1]
    assert again.ok, render_rolling(again)  # the recovery command put it back
    assert encode(again.workers[0].phases[0]).get("already_out") is True


async def _running_on(decode: str) -> None:
    """Wait (bounded: 60 s, a loaded machine's prefill and hand-off included) until the decode
    runs a request."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if running_requests(await get_json(decode + "/get_load", timeout=10.0)):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{decode} never ran a request")


async def _workers(router: str) -> list[dict[str, Any]]:
    doc = await get_json(router + "/workers")
    assert isinstance(doc, dict)
    return list(doc["workers"])


def test_a_vllm_deployment_is_refused_before_any_worker_is_touched(tmp_path: Path) -> None:
    spec_path, _ports = write_2p2d_spec(tmp_path)
    spec_path.write_text(
        spec_path.read_text().replace('name = "local-2p2d"', 'name = "v"\nengine = "vllm"')
    )
    loaded = load_spec(spec_path)
    assert loaded.spec.engine == "vllm"

    async def scenario() -> str:
        with Ledger.open(tmp_path / "ledger.db") as ledger:
            with pytest.raises(RouterApiError, match="the vllm router's worker API cannot") as err:
                await rolling_restart(loaded, ["decode"], ledger=ledger)
            rows = [
                row for row in ledger.list(DeploymentRecord) if row.action == "restart --rolling"
            ]
            assert len(rows) == 1 and rows[0].detail["ok"] is False
            assert rows[0].detail["workers"] == [] and rows[0].detail["out"] is None
        return str(err.value)

    message = asyncio.run(scenario())
    assert "use `servelab restart`" in str(message)
