"""One request, every hop: the real sglang-router's span and the simulated workers' phase spans,
received by servelab's OTLP receiver and joined to the client's own timestamps."""

from __future__ import annotations

import time
import uuid

from servelab.core.load.metrics import ttft_ns
from servelab.core.load.records import RequestRecord
from servelab.core.telemetry.traces import (
    PHASES,
    ClockAnchor,
    decompose,
    phase_percentiles,
    spans_by_request,
)
from servelab.io.http.client import StreamClient, chat_body
from servelab.io.otlp import OtlpReceiver
from servelab.ops.telemetry.tracing import read_anchor
from servelab.sim.settings import ENV_OTLP
from tests.support.stack import sim_stack

REQUESTS = 5
#: sglang-router 0.3.2 puts its own ``http_request`` span in the workers' trace for most requests,
#: not all: in about half of the runs one request of five has worker spans whose trace holds no
#: router span (observed here; the join by request id does not need it).
ROUTED = REQUESTS - 1
#: Clock agreement: no interval between a client and a worker timestamp may be negative by more
#: than this, and the phases leave at most this much of the client's TTFT unaccounted for.
TOLERANCE_MS = 1.0


async def _one(url: str, rid: str, index: int) -> RequestRecord:
    body = chat_body("servelab-sim", f"request {index}: " + "word " * 200, 8)
    async with StreamClient(url, concurrency=1, headers={"x-request-id": rid}) as client:
        record = RequestRecord(index=index, scheduled_ns=time.perf_counter_ns())
        return await client.stream("/v1/chat/completions", body, record)


async def test_router_and_worker_spans_join_the_client_record_by_request_id() -> None:
    async with OtlpReceiver() as rx:
        env = {ENV_OTLP: rx.endpoint}
        trace = ["--enable-trace", "--otlp-traces-endpoint", rx.endpoint]
        with sim_stack(time_scale=0.2, env=env, router_args=trace) as stack:
            # one request first: it pays the cold start and the router's lazy exporter set-up
            await _one(stack.router_url, f"servelab-warmup-{uuid.uuid4().hex}", -1)
            anchor = read_anchor()  # the tightest bracketed reading (ops.telemetry.tracing)
            rids = [f"servelab-{uuid.uuid4().hex}" for _ in range(REQUESTS)]
            records = [await _one(stack.router_url, rid, i) for i, rid in enumerate(rids)]

            def complete(spans: list) -> bool:  # type: ignore[type-arg]
                got = spans_by_request(spans)
                return (
                    all(
                        {"prefill", "first_decode_step"} <= {s.name for s in got.get(r, [])}
                        for r in rids
                    )
                    and sum("http_request" in {s.name for s in got.get(r, [])} for r in rids)
                    >= ROUTED
                )

            done = await rx.wait_for(complete, timeout=60)
            got = spans_by_request(rx.spans)
            names = {r[-6:]: sorted(s.name for s in got.get(r, [])) for r in rids}
            missing = {r: n for r, n in names.items() if len(n) < 5}
            assert done, (missing, sorted({(s.name, s.trace_id[:8]) for s in rx.spans}))
    by_request = spans_by_request(rx.spans)
    breakdowns, routed = [], 0
    for rid, record in zip(rids, records, strict=True):
        assert record.ok, record.error
        spans = by_request[rid]
        services = {s.service for s in spans}
        assert {"servelab-sim-prefill", "servelab-sim-decode"} <= services
        router = next((s for s in spans if s.name == "http_request"), None)
        # the workers' spans are children of the router's trace (its traceparent)
        assert all(s.trace_id == spans[0].trace_id for s in spans)
        routed += router is not None
        first = record.event_ns[0] if record.event_ns else None
        got_ttft = ttft_ns(record)
        assert first is not None and got_ttft is not None
        first_content = record.scheduled_ns + got_ttft
        b = decompose(rid, record.scheduled_ns, record.sent_ns, first_content, anchor, spans)
        assert b is not None
        assert set(b.phases) == set(PHASES)
        # every interval is causal: the client's and the workers' clocks agree through the anchor
        assert all(v / 1e6 >= -TOLERANCE_MS for v in b.phases.values()), b.to_json()
        assert abs(b.gap_ns) / 1e6 <= TOLERANCE_MS, b.to_json()
        # the router's own span covers the whole exchange it forwarded
        if router is not None:
            assert b.router_span_ns is not None
            assert b.router_span_ns >= b.ttft_ns - b.phases["dispatch"]
        breakdowns.append(b)
    assert routed >= ROUTED
    table = phase_percentiles(breakdowns)
    assert table["prefill"]["p50"] > 0 and table["kv_transfer"]["p50"] > 0


async def test_a_request_without_server_spans_is_untraced_not_zero() -> None:
    anchor = ClockAnchor(0, 0)
    assert decompose("r", 0, 1, 10, anchor, []) is None
