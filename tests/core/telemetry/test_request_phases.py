"""How far a failed request got, by the worker spans that came back for it (pure): SGLang's stage
spans, or vLLM's one ``llm_request`` span per worker that finished the request."""

from __future__ import annotations

import json

from servelab.core.ledger.codec import decode, encode
from servelab.core.soak.result import SoakConfig, SoakResult, SoakTraces, Targets
from servelab.core.telemetry.spans import WORKER_PHASES, Span
from servelab.core.telemetry.traces import phases_so_far

#: Per worker phase, the SGLang stage span that ends with it.
STAGES = (
    "prefill_waiting", "prefill_forward", "decode_transferred", "fake_output", "decode_forward",
)  # fmt: skip


def _span(name: str, attrs: dict[str, str] | None = None) -> Span:
    return Span("t", name, "", name, "sglang", 1, 2, attrs or {})


def test_the_phases_seen_are_in_pd_order_and_the_next_one_is_missing() -> None:
    router = _span("http_request", {"request_id": "r"})
    root = _span("prefill Req 0a1b2c3d")
    spans = [_span("prefill_forward"), router, _span("prefill_waiting"), root]
    p = phases_so_far("r", 1, 2, "stalled", spans)
    assert p.seen == ("prefill_queue", "prefill") and p.n_spans == 4
    assert p.last == "prefill" and p.first_missing == "kv_transfer"
    # stored as its fields (the soak's result, through the codec); last/first_missing derived
    assert encode(p) == {"request_id": "r", "session": 1, "round": 2, "outcome": "stalled",
                         "seen": ["prefill_queue", "prefill"], "n_spans": 4}  # fmt: skip


def test_no_worker_span_and_every_phase_say_so() -> None:
    none = phases_so_far("r", 0, 0, "error", [_span("http_request", {"request_id": "r"})])
    assert none.seen == () and none.last is None and none.first_missing is None
    every = phases_so_far("r", 0, 0, "error", [_span(n) for n in STAGES])
    assert every.seen == WORKER_PHASES
    assert every.last == "decode" and every.first_missing is None


def test_vllm_exports_a_span_per_worker_that_finished_the_request() -> None:
    prefilled = phases_so_far("r", 0, 0, "error", [_span("llm_request")])
    assert prefilled.seen == ("prefill_queue", "prefill")
    assert prefilled.first_missing == "kv_transfer"  # the decode's pull of the KV failed
    both = phases_so_far("r", 0, 0, "error", [_span("llm_request"), _span("llm_request")])
    assert both.seen == WORKER_PHASES


def test_a_soak_result_keeps_its_traces_and_an_untraced_one_has_none() -> None:
    traces = SoakTraces(3, (phases_so_far("r", 0, 0, "error", [_span("prefill_forward")]),))
    stored = json.loads(json.dumps(encode(traces)))
    assert stored["requests"][0]["seen"] == ["prefill"]
    assert decode(SoakTraces, stored) == traces
    assert SoakResult(SoakConfig(), Targets("http://e")).traces is None
