"""A recorded bench run read into types once (core/bench/stored.py): of any age, every part the
page shows typed, a part that does not read left out."""

from __future__ import annotations

import json
from typing import Any

from servelab.core.bench import stored
from servelab.core.bench.record import BenchRunRecord
from servelab.core.bench.stored import StoredPhase, stored_run
from tests.support.old_rows import BENCH_SUMMARY_BEFORE_CONTRACT


def _run(summary: dict[str, Any]) -> BenchRunRecord:
    return BenchRunRecord(3, "2026-12-01T00:00:00Z", None, {}, summary)


def test_public_api() -> None:
    for name in stored.__all__:
        assert hasattr(stored, name), name


def test_a_summary_stored_before_the_contract_reads_as_its_parts() -> None:
    run = stored_run(_run(json.loads(BENCH_SUMMARY_BEFORE_CONTRACT)))
    assert run.level is not None and run.level.n_ok == 4
    assert run.failures == {"http 500": 1}
    assert run.cache is not None  # recorded then; no SLO, telemetry or traces yet
    assert (run.slo, run.goodput, run.telemetry, run.evidence, run.traces) == (None,) * 5


def test_the_phases_and_counters_read_leniently_and_a_misfit_is_left_out() -> None:
    traces = {"summary": {"n_requests": 4, "n_traced": 3, "n_untraced": 1,
                          "phases_ms": {"prefill": {"p50": 6.25, "p90": 7.0, "p99": 9.5},
                                        "kv_transfer": {"p50": 3.5}}}}  # fmt: skip
    telemetry = {"sources": [{"service": "router", "kind": "router", "state": "unknown",
                              "reason": "HTTP 404"}]}  # fmt: skip
    run = stored_run(_run({"traces": traces, "telemetry": telemetry, "failures": {"x": True}}))
    assert run.traces is not None and (run.traces.n_traced, run.traces.n_routed) == (3, 0)
    assert run.traces.phases["kv_transfer"] == StoredPhase(3.5, None, None)
    assert run.telemetry is not None and run.telemetry.sources[0].reason == "HTTP 404"
    assert run.failures == {} and run.level is None
    bad = stored_run(_run({"traces": {"summary": {"phases_ms": {"prefill": 1}}}, "telemetry": []}))
    assert bad.traces is None and bad.telemetry is None
