"""Issue 13's done-when, through the product: a spec with ``[tracing]``, ``servelab up`` (the real
sglang-router with ``--enable-trace --otlp-traces-endpoint``, the simulated workers with theirs),
then ``servelab bench``: every request carries its own ``x-request-id`` and ``traceparent``, the
receiver runs for the sweep, and each request's router and worker spans are joined to the client's
timestamps, its TTFT split into phases that add up to it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from servelab.core.telemetry.traces import PHASES, RETURN_HELD_MS
from servelab.io.ledger.ledger import Ledger
from tests.support import run_cli
from tests.support.tracing import write_traced_spec

REQUESTS = 8
CONCURRENCY = (1, 2)
#: The phases are consecutive intervals between client and worker timestamps: no request may
#: leave more than this of its TTFT unaccounted for, and no phase may be negative by more than
#: this (the client's and the workers' clocks agree through the client's anchor).
TOLERANCE_MS = 1.0
#: sglang-router 0.3.2 leaves its own span out of a run for some requests (7 of 96 in twelve runs
#: here; such a span ends only with the router's later traffic, seconds to tens of seconds on, so
#: no wait catches it: docs/bench.md): at least this share of the sweep's traced requests has it,
#: pooled over the sweep (per run of 8, a miss rate of one in five would fail it one run in 18).
ROUTED_SHARE = 0.6


def _cli(root: Path, *args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    ledger = {"SERVELAB_LEDGER": str(root / "state" / "ledger.db")}
    return run_cli(*args, cwd=root, timeout=timeout, env=ledger)


def test_bench_joins_every_request_to_its_router_and_worker_spans(tmp_path: Path) -> None:
    write_traced_spec(
        tmp_path, time_scale=0.2, worker_env="SERVELAB_SIM_WARMUP_S=1\n", name="traced"
    )
    up = _cli(tmp_path, "up")
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        conc = ",".join(map(str, CONCURRENCY))
        done = _cli(
            tmp_path,
            "bench",
            "--concurrency",
            conc,
            "--requests",
            str(REQUESTS),
            "--warmup",
            "2",
            "--input-len",
            "200",
            "--output-len",
            "8",
            "--json",
        )
    finally:
        down = _cli(tmp_path, "down")
    assert done.returncode == 0, done.stdout + done.stderr
    assert down.returncode == 0, down.stdout + down.stderr
    doc = json.loads(done.stdout)
    for level in doc["levels"]:
        phases = level["ttft_phases"]
        # a Nagle-held return (tests/io/http/test_tcp_nodelay.py) is named the router's, not the
        # engines'
        held = phases["phases_ms"]["return"]["p50"] >= RETURN_HELD_MS
        assert (f"C{level['concurrency']}: return (p50" in done.stderr) == held, done.stderr
        assert f"C{level['concurrency']} run 1: " in done.stderr  # its run-telemetry evidence
        assert phases["n_requests"] == REQUESTS and phases["n_untraced"] == 0, phases
        assert set(phases["phases_ms"]) == {*PHASES, "gap"}
        assert phases["phases_ms"]["prefill"]["p50"] > 0
        assert phases["max_abs_gap_ms"] <= TOLERANCE_MS, phases
    with Ledger.open(tmp_path / "state" / "ledger.db") as ledger:
        runs = [ledger.get_bench_run(r.id) for r in ledger.list_bench_runs()]
        stored = {r.id: ledger.spans(run_id=r.id) for r in ledger.list_bench_runs()}
    assert len(runs) == len(CONCURRENCY)
    n_traced = n_routed = 0
    for run in runs:
        assert run is not None and run.records is not None
        traces = run.summary["traces"]
        # the spans themselves are in the ledger with their run, every one the receiver got
        assert len(stored[run.id]) == traces["n_spans"] > 0
        assert {str(r["request_id"]) for r in run.records} <= {s.request_id for s in stored[run.id]}
        by_id = {b["request_id"]: b for b in traces["breakdowns"]}
        ids = [str(r["request_id"]) for r in run.records]
        # every request had its own id on the wire, and its spans came back under it
        assert len(set(ids)) == REQUESTS and all(i.startswith("servelab-") for i in ids)
        assert set(by_id) == set(ids) and traces["untraced"] == []
        assert all(str(r["traceparent"]).startswith("00-") for r in run.records)
        for b in by_id.values():
            assert set(b["phases"]) == set(PHASES)
            assert all(v / 1e6 >= -TOLERANCE_MS for v in b["phases"].values()), b
            assert abs(b["gap_ns"]) / 1e6 <= TOLERANCE_MS, b
            assert b["ttft_ns"] == sum(b["phases"].values()) + b["gap_ns"]
        routed = [b for b in by_id.values() if b["router_span_ns"] is not None]
        n_traced, n_routed = n_traced + len(by_id), n_routed + len(routed)
        assert routed, traces["summary"]  # every run joins some router spans
        assert all(b["router_span_ns"] > 0 for b in routed)
        lowest = min(min(b["phases"].values()) for b in by_id.values()) / 1e6
        print(
            f"traced {len(by_id)}, routed {len(routed)}, lowest phase {lowest:.3f} ms, "
            f"largest gap {max(abs(b['gap_ns']) for b in by_id.values()) / 1e6:.3f} ms"
        )
    assert n_routed >= ROUTED_SHARE * n_traced, (n_routed, n_traced)
