"""The telemetry a bench run stores, written through the codec: the same JSON, key for key and in
the same order, as the hand-written ``to_json`` methods it replaced wrote (rows written by earlier
servelab decode and re-encode byte for byte)."""

from __future__ import annotations

import json
import math

from servelab.core.ledger.codec import decode, encode
from servelab.core.telemetry.rules import Cite, TelemetryEvidence
from servelab.core.telemetry.spans import Span
from servelab.core.telemetry.summary import RunTelemetry, SourceTelemetry
from servelab.core.telemetry.traces import PhaseQuantiles, TtftBreakdown

#: A bench run's ``summary["telemetry"]`` as servelab wrote it before the codec did.
OLD_TELEMETRY = {
    "via": "scrape",
    "duration_s": 2.0,
    "sources": [
        {
            "service": "decode", "kind": "engine", "url": "http://127.0.0.1:1/metrics",
            "state": "ok", "reason": None, "scrapes": 3, "duration_s": 2.0,
            "counters": {'r_total{w="1"}': 10.0}, "rates": {'r_total{w="1"}': 5.0},
            "quantiles": {"ttft_seconds": {"p50": 0.1, "p90": None, "p99": 0.4}},
            "gauges": {"running": [[0.0, 0.0], [1.0, 4.0]]}, "role": "decode",
        },
        {
            "service": "router", "kind": "router", "url": "http://127.0.0.1:2/metrics",
            "state": "unknown", "reason": "HTTP 404", "scrapes": 0, "duration_s": 0.0,
            "counters": {}, "rates": {}, "quantiles": {}, "gauges": {}, "role": "",
        },
    ],
}  # fmt: skip

#: One span as the ledger's export wrote it before.
OLD_SPAN = {
    "trace_id": "ab" * 16, "span_id": "cd" * 8, "parent_id": "", "name": "http_request",
    "service": "sglang-router", "start_ns": 1, "end_ns": 2,
    "attributes": {"request_id": "servelab-r-0", "status": 200},
}  # fmt: skip


def test_old_run_telemetry_re_encodes_byte_for_byte() -> None:
    again = encode(decode(RunTelemetry, OLD_TELEMETRY))
    assert json.dumps(again) == json.dumps(OLD_TELEMETRY)


def test_a_number_that_was_not_finite_is_stored_as_null_and_reads_back_as_nan() -> None:
    nan = float("nan")
    src = SourceTelemetry("d", "engine", "u", "ok", counters={"a": nan}, gauges={"g": [(0.0, nan)]})
    stored = encode(RunTelemetry("scrape", 1.0, (src,)))
    assert stored["sources"][0]["counters"] == {"a": None}
    read = decode(RunTelemetry, json.dumps(stored)).sources[0]
    assert math.isnan(read.counters["a"]) and math.isnan(read.gauges["g"][0][1])


def test_an_old_span_re_encodes_byte_for_byte() -> None:
    assert json.dumps(encode(decode(Span, OLD_SPAN))) == json.dumps(OLD_SPAN)


def test_evidence_quantiles_and_breakdowns_keep_their_keys() -> None:
    cite = Cite("decode", 'r_total{w="1"}', 10.0)
    evidence = TelemetryEvidence("transfer", "decode", "fired", None, "decode0", (cite,),
                                 threshold=1.0)  # fmt: skip
    assert json.dumps(encode(evidence)) == json.dumps({
        "rule": "transfer", "subject": "decode", "state": "fired", "points_at": None,
        "worker": "decode0",
        "cites": [{"source": "decode", "series": 'r_total{w="1"}', "value": 10.0, "kind": "delta"}],
        "threshold": 1.0,
    })  # fmt: skip
    # a reading stored before the codes (an English reason, null when it had none) reads the same
    old = {**encode(evidence), "reason": None}
    assert decode(TelemetryEvidence, old) == evidence
    assert encode(PhaseQuantiles(1.0, 2.0, 3.0)) == {"p50": 1.0, "p90": 2.0, "p99": 3.0}
    b = TtftBreakdown("r", 100, {"router": 30, "prefill": 50}, 25)
    stored = {"request_id": "r", "ttft_ns": 100, "phases": {"router": 30, "prefill": 50},
              "gap_ns": 20, "router_span_ns": 25}  # fmt: skip
    assert encode(b) == stored  # a bench summary's keys are sorted when stored
    assert decode(TtftBreakdown, stored) == b
