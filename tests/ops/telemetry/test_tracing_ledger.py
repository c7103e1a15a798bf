"""A traced bench run's received spans in the ledger: through the real sglang-router and the
simulated workers exporting to the run's receiver, ``run_bench`` records every span it received
with the run (a real SQLite file), and they come back equal to what the receiver got."""

from __future__ import annotations

from pathlib import Path

from servelab.core.bench.contract import BenchConfig
from servelab.core.bench.record import BenchRunRecord
from servelab.core.deploy.spec import TracingSpec
from servelab.core.load.workload import LengthDist
from servelab.core.telemetry.traces import spans_by_request, traced
from servelab.io.ledger.ledger import Ledger
from servelab.ops.bench.bench import run_bench
from servelab.ops.telemetry.tracing import TraceCollector
from servelab.sim.settings import ENV_OTLP
from tests.support import free_ports
from tests.support.stack import sim_stack

REQUESTS = 6


async def test_a_traced_runs_spans_come_back_from_the_ledger_as_received(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    endpoint = f"127.0.0.1:{port}"
    collector = TraceCollector(TracingSpec(endpoint=endpoint, wait_s=30.0))
    with (
        Ledger.open(tmp_path / "ledger.db") as ledger,
        sim_stack(time_scale=0.2, env={ENV_OTLP: endpoint}) as stack,
    ):
        config = BenchConfig(url=stack.router_url, concurrencies=(2,), requests=REQUESTS,
                             warmup=1, input_len=LengthDist("fixed", 64),
                             output_len=LengthDist("fixed", 4), model="servelab-sim")  # fmt: skip
        result = await run_bench(config, ledger=ledger, traces=collector)
        (run,) = result.runs
        assert run.run_id is not None and run.traces is not None
        stored = ledger.spans(run_id=run.run_id)
        summary = ledger.get(BenchRunRecord, run.run_id, whole=False)
    received = list(run.traces.spans)
    assert run.traces.complete and run.traces.untraced == ()
    assert stored == received and len(stored) == run.traces.n_spans
    assert summary is not None and summary.summary["traces"]["n_spans"] == len(stored)
    by_request = spans_by_request(stored, [r.request_id for r in run.records if r.ok])
    # every measured request's worker spans are among them, in its own trace
    assert all(traced(by_request[r.request_id]) for r in run.records if r.ok)
    assert {s.service for s in stored} == {"sglang"}
