"""Issues 13's and 24's done-when, through the product: a spec with ``[tracing]``, ``servelab up``
(the engine's real router, the simulated workers with the engine's own tracing switches and no
``SERVELAB_SIM_EXTRAS``: SGLang's root and stage spans, vLLM's ``llm_request`` spans), then
``servelab bench``: every request carries its own ``x-request-id`` and ``traceparent``, the
router forwards the latter, the receiver runs for the sweep, and every request's worker spans are
joined to the client's timestamps by its own trace, its TTFT split into phases that add up to it
(within ``TOLERANCE_MS``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from servelab.core.bench.record import BenchRunRecord
from servelab.core.ledger.codec import encode
from servelab.core.load.identity import trace_of
from servelab.core.telemetry.traces import PHASES, RETURN_HELD_MS
from servelab.io.ledger.ledger import Ledger
from servelab.sim.settings import ENV_EXTRAS
from tests.support import run_cli
from tests.support.tracing import write_traced_spec

REQUESTS = 8
CONCURRENCY = (1, 2)
#: The phases are consecutive intervals between client and worker timestamps: no request may
#: leave more than this of its TTFT unaccounted for, and no phase may be negative by more than
#: this (the client's and the workers' clocks agree through the client's anchor).
TOLERANCE_MS = 1.0


def _cli(root: Path, *args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    env = {"SERVELAB_LEDGER": str(root / "state" / "ledger.db"), ENV_EXTRAS: ""}
    return run_cli(*args, cwd=root, timeout=timeout, env=env)


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_bench_joins_every_request_to_its_engines_spans(engine: str, tmp_path: Path) -> None:
    spec, _ = write_traced_spec(
        tmp_path, time_scale=0.2, worker_env="SERVELAB_SIM_WARMUP_S=1\n", name="traced"
    )
    if engine == "vllm":
        spec.write_text(
            spec.read_text().replace('name = "traced"', 'name = "traced"\nengine = "vllm"')
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
        runs = [ledger.get(BenchRunRecord, r.id) for r in ledger.list(BenchRunRecord)]
        stored = {r.id: ledger.spans(run_id=r.id) for r in ledger.list(BenchRunRecord)}
    assert len(runs) == len(CONCURRENCY)
    for run in runs:
        assert run is not None and run.records is not None
        traces = run.summary["traces"]
        # the spans themselves are in the ledger with their run, every one the receiver got, each
        # request's in its own trace (the engine's names: no span says servelab but the model)
        assert len(stored[run.id]) == traces["n_spans"] > 0
        traces_of = {trace_of(str(r["request_id"])) for r in run.records}
        assert traces_of <= {s.trace_id for s in stored[run.id]}
        said = [str(encode(s)).replace("servelab-sim", "") for s in stored[run.id]]
        assert not [s for s in said if "servelab" in s]
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
        lowest = min(min(b["phases"].values()) for b in by_id.values()) / 1e6
        print(
            f"{engine}: traced {len(by_id)}, lowest phase {lowest:.3f} ms, "
            f"largest gap {max(abs(b['gap_ns']) for b in by_id.values()) / 1e6:.3f} ms"
        )
