"""The trace hand-off of ``run_bench`` on a stack whose servers export nothing: the receiver runs
on the spec's endpoint, the wait for late spans is bounded, and every request is untraced —
counted, never taken as a zero."""

from __future__ import annotations

import time
from dataclasses import replace

from servelab.core.bench.contract import BenchConfig
from servelab.core.bench.summary import run_summary
from servelab.core.deploy.spec import TracingSpec
from servelab.core.ledger.codec import encode
from servelab.core.load.workload import LengthDist
from servelab.ops.bench.bench import run_bench
from servelab.ops.telemetry.tracing import TraceCollector
from tests.support import free_ports
from tests.support.stack import sim_stack

WAIT_S = 1.0


async def test_requests_without_spans_are_untraced_and_the_wait_is_bounded() -> None:
    (port,) = free_ports(1)
    collector = TraceCollector(TracingSpec(endpoint=f"127.0.0.1:{port}", wait_s=WAIT_S))
    assert collector.endpoint == f"127.0.0.1:{port}"
    with sim_stack(time_scale=0.05) as stack:
        config = BenchConfig(url=stack.router_url, concurrencies=(2,), requests=6,
                             input_len=LengthDist("fixed", 16), output_len=LengthDist("fixed", 4),
                             model="servelab-sim")  # fmt: skip
        started = time.monotonic()
        result = await run_bench(config, traces=collector)
        took = time.monotonic() - started
        # without a collector nothing waits and nothing is joined
        plain = await run_bench(replace(config, concurrencies=(1,)))
    assert plain.runs[0].traces is None and plain.levels[0].traces is None
    run = result.runs[0]
    assert result.n_failed == 0 and run.traces is not None
    assert not run.traces.complete and run.traces.breakdowns == ()
    assert sorted(run.traces.untraced) == sorted(r.request_id for r in run.records)
    level = result.levels[0].traces
    assert level is not None and (level.n_requests, level.n_traced, level.n_untraced) == (6, 0, 6)
    assert level.phases == {} and level.max_abs_gap_ms is None  # no zero stands in for them
    assert took < 30  # bounded: one wait of WAIT_S, not an endless one
    summary, records = encode(run_summary(run)), [encode(r) for r in run.records]
    assert summary["traces"]["summary"]["n_untraced"] == 6
    assert all(r["request_id"].startswith("servelab-") for r in records)
