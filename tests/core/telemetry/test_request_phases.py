"""How far a failed request got, by the worker spans that came back for it (pure)."""

from __future__ import annotations

import json

from servelab.core.ledger.codec import decode, encode
from servelab.core.soak.result import SoakConfig, SoakResult, SoakTraces, Targets
from servelab.core.telemetry.traces import REQUEST_ID_ATTR, WORKER_PHASES, Span, phases_so_far


def _span(name: str, rid: str | None = "r") -> Span:
    attrs = {} if rid is None else {REQUEST_ID_ATTR: rid}
    return Span("t", name, "", name, "svc", 1, 2, attrs)


def test_the_phases_seen_are_in_pd_order_and_the_next_one_is_missing() -> None:
    spans = [_span("prefill"), _span("http_request", None), _span("prefill_queue")]
    p = phases_so_far("r", 1, 2, "stalled", spans)
    assert p.seen == ("prefill_queue", "prefill") and p.n_spans == 3
    assert p.last == "prefill" and p.first_missing == "kv_transfer"
    assert p.to_json()["first_missing"] == "kv_transfer" and p.to_json()["seen"] == list(p.seen)


def test_no_worker_span_and_every_phase_say_so() -> None:
    none = phases_so_far("r", 0, 0, "error", [_span("http_request", None)])
    assert none.seen == () and none.last is None and none.first_missing is None
    every = phases_so_far("r", 0, 0, "error", [_span(n) for n in WORKER_PHASES])
    assert every.last == "decode" and every.first_missing is None


def test_a_soak_result_keeps_its_traces_and_an_untraced_one_has_none() -> None:
    traces = SoakTraces(3, (phases_so_far("r", 0, 0, "error", [_span("prefill")]),))
    stored = json.loads(json.dumps(encode(traces)))
    assert stored["requests"][0]["seen"] == ["prefill"]
    assert decode(SoakTraces, stored) == traces
    assert SoakResult(SoakConfig(), Targets("http://e")).traces is None
