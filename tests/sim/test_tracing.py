"""One request, every hop: the simulated workers' spans (SGLang's and vLLM's shapes) through the
real routers, received by servelab's OTLP receiver and joined to the client's own timestamps by
the client's trace (or, when sglang-router traces itself, by its span naming the request)."""

from __future__ import annotations

import time
from contextlib import AbstractContextManager

import pytest

from servelab.core.ledger.codec import encode
from servelab.core.load.identity import request_identity
from servelab.core.load.metrics import ttft_ns
from servelab.core.load.records import RequestRecord
from servelab.core.telemetry.spans import Span
from servelab.core.telemetry.traces import (
    PHASES,
    ClockAnchor,
    TtftBreakdown,
    decompose,
    phase_percentiles,
    spans_by_request,
    traced,
)
from servelab.io.http.client import chat_body
from servelab.io.http.stream import StreamClient
from servelab.io.otlp import OtlpReceiver
from servelab.ops.telemetry.tracing import read_anchor
from servelab.sim.settings import ENV_OTLP
from tests.support.stack import sim_stack
from tests.support.vllmstack import vllm_stack

REQUESTS = 5
#: Clock agreement: no interval between a client and a worker timestamp may be negative by more
#: than this, and the phases leave at most this much of the client's TTFT unaccounted for.
TOLERANCE_MS = 1.0
TAG = "00000000000000f0"


async def _one(url: str, index: int) -> RequestRecord:
    body = chat_body("servelab-sim", f"request {index}: " + "word " * 200, 8)
    async with StreamClient(url, concurrency=1) as client:
        record = RequestRecord(index=index, scheduled_ns=time.perf_counter_ns())
        record.request_id, record.traceparent = request_identity(TAG, index)
        return await client.stream("/v1/chat/completions", body, record)


def _breakdowns(
    records: list[RequestRecord], anchor: ClockAnchor, spans: list[Span]
) -> list[TtftBreakdown]:
    by_request = spans_by_request(spans, [r.request_id for r in records])
    out = []
    for record in records:
        assert record.ok, record.error
        got_ttft = ttft_ns(record)
        assert got_ttft is not None
        first_content = record.scheduled_ns + got_ttft
        mine = by_request[record.request_id]
        b = decompose(record.request_id, record.scheduled_ns, record.sent_ns, first_content,
                      anchor, mine)  # fmt: skip
        if b is None:
            continue
        assert set(b.phases) == set(PHASES)
        # every interval is causal: the client's and the workers' clocks agree through the anchor
        assert all(v / 1e6 >= -TOLERANCE_MS for v in b.phases.values()), encode(b)
        assert abs(b.gap_ns) / 1e6 <= TOLERANCE_MS, encode(b)
        out.append(b)
    return out


def _sglang(endpoint: str, router_args: list[str]) -> AbstractContextManager[object]:
    return sim_stack(time_scale=0.2, env={ENV_OTLP: endpoint}, router_args=router_args)


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
async def test_every_request_decomposes_from_the_engines_spans(engine: str) -> None:
    async with OtlpReceiver() as rx:
        env = {ENV_OTLP: rx.endpoint}
        stack = (
            _sglang(rx.endpoint, []) if engine == "sglang" else vllm_stack(time_scale=0.2, env=env)
        )
        with stack as st:
            url = st.router_url  # type: ignore[attr-defined]
            await _one(url, -1)  # pays the cold start
            anchor = read_anchor()
            records = [await _one(url, i) for i in range(REQUESTS)]
            ids = [r.request_id for r in records]

            def complete(spans: list[Span]) -> bool:
                return all(traced(mine) for mine in spans_by_request(spans, ids).values())

            assert await rx.wait_for(complete, timeout=60)
            spans = rx.spans
    breakdowns = _breakdowns(records, anchor, spans)
    assert len(breakdowns) == REQUESTS  # every request, from the engines' own span names
    assert all(b.router_span_ns is None for b in breakdowns)  # no router span: not traced
    table = phase_percentiles(breakdowns)
    assert table["prefill"]["p50"] > 0 and table["kv_transfer"]["p50"] > 0
    print(f"{engine}: max |gap| {max(abs(b.gap_ns) for b in breakdowns) / 1e6:.4f} ms")


async def test_a_router_tracing_itself_joins_through_its_span() -> None:
    """sglang-router 0.3.2 with --enable-trace: the workers' spans are in the router's trace,
    which its span naming the request ties to the client; a request whose router span the
    router left out (about one in fifty) is untraced, never zero."""
    async with OtlpReceiver() as rx:
        trace = ["--enable-trace", "--otlp-traces-endpoint", rx.endpoint]
        with _sglang(rx.endpoint, trace) as st:
            url = st.router_url  # type: ignore[attr-defined]
            await _one(url, -1)
            anchor = read_anchor()
            records = [await _one(url, i) for i in range(REQUESTS)]
            ids = [r.request_id for r in records]

            def most(spans: list[Span]) -> bool:
                got = spans_by_request(spans, ids).values()
                return sum(traced(mine) for mine in got) >= REQUESTS - 1

            assert await rx.wait_for(most, timeout=60)
            spans = rx.spans
    own = {r.traceparent.split("-")[1] for r in records}
    assert not own & {s.trace_id for s in spans}  # the router started its own traces
    breakdowns = _breakdowns(records, anchor, spans)
    assert len(breakdowns) >= REQUESTS - 1
    assert all(b.router_span_ns is not None for b in breakdowns)
    assert all(b.router_span_ns >= b.ttft_ns - b.phases["dispatch"] for b in breakdowns)  # type: ignore[operator]


async def test_a_request_without_server_spans_is_untraced_not_zero() -> None:
    anchor = ClockAnchor(0, 0)
    assert decompose("r", 0, 1, 10, anchor, []) is None
