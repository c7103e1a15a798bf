"""The words of an SLO's verdicts, of a cache's hit rate, and of a capacity search's conclusion."""

from __future__ import annotations

import math
from dataclasses import replace

from servelab.core.load.cache import CacheSummary
from servelab.core.load.capacity import (
    Capacity,
    CapacityStop,
    LoadKind,
    Probe,
    conclude,
    rate_probe,
)
from servelab.core.load.metrics import slo_attainment
from servelab.core.load.records import RequestRecord
from servelab.core.load.slo import parse_slo
from servelab.report.capacity import conclusion, load_text, served_text
from servelab.report.slo import attainment_text, cache_text, slo_rows, verdict_word

MS = 1_000_000


def _ok(ttft_ms: int) -> RequestRecord:
    return RequestRecord(0, 0, sent_ns=0, status=200, end_ns=(ttft_ms + 5) * MS,
                         event_ns=[ttft_ms * MS, (ttft_ms + 5) * MS], event_tokens=[1, 1],
                         output_tokens=2)  # fmt: skip


def test_an_slo_is_worded_per_objective_with_its_interval() -> None:
    att = slo_attainment([_ok(100)] * 20 + [_ok(3000)], parse_slo("ttft_p90=2s"))
    rows = dict(slo_rows(att))
    assert rows["SLO ttft ≤ 2,000 ms"].startswith("p90 100.0 ms: met (unsure) (95.2% within")
    assert "n=21" in rows["SLO ttft ≤ 2,000 ms"]
    assert attainment_text(att) == "95.2% of 21 requests met every objective: SLO met (unsure)"
    assert (verdict_word(True, True), verdict_word(False, False)) == ("met", "missed (unsure)")


def test_a_cache_is_unknown_until_an_engine_reports_it() -> None:
    assert cache_text(CacheSummary(4, 0, 0, 0)).startswith("unknown (no request reported")
    text = cache_text(CacheSummary(4, 4, 10_000, 8_250))
    assert text == "82.5% (8,250 of 10,000 prompt tokens cached, 4 of 4 requests reported)"


def test_each_end_of_a_search_is_worded() -> None:
    probes = (Probe(48, True, True, 900.0, 0.98), Probe(56, False, True, 950.0, 1.05))
    found = Capacity(LoadKind.CONCURRENCY, CapacityStop.BRACKETED, 48, 56, 50.3, True, probes)
    assert conclusion(found) == (
        "capacity C48: the SLO holds there and not at C56; the binding objective crosses its "
        "limit near C50.3 (both verdicts sure at 95%)"
    )
    saturated = Capacity(LoadKind.RATE, CapacityStop.SATURATED, 8.0, None, None, False, probes)
    assert conclusion(saturated).startswith("saturated at 8 req/s: doubling the load")
    assert "more --requests" in conclusion(saturated)
    never = Capacity(LoadKind.CONCURRENCY, CapacityStop.NEVER_MET, None, None, None, False, probes)
    assert conclusion(never) == "the SLO was missed at every load tried, down to C48"
    assert (
        load_text(LoadKind.RATE, 12.345) == "12.3 req/s" and load_text(LoadKind.RATE, None) == "–"
    )


def test_a_rate_search_past_its_sustained_probes_says_it_cannot_tell() -> None:
    """Issue 38 (23rd pass H1): no capacity claimed above the rate the probes sustain."""
    probes = (Probe(150.0, True, True, 900.0, 0.5), Probe(300.0, True, True, 1800.0, 0.6))
    found = Capacity(LoadKind.RATE, CapacityStop.LIMITED, 300.0, None, None, True, probes,
                     limit=300.0)  # fmt: skip
    words = conclusion(found, span_s=10)
    assert words.startswith("cannot tell above 300 req/s: the SLO held at 300 req/s")
    assert "10 s of arrivals" in words and "raise --requests" in words
    assert "saturated" not in words and "at least" not in words
    saturated = Capacity(LoadKind.RATE, CapacityStop.SATURATED, 150.0, None, None, True, probes)
    assert "each rate sustained for 10 s" in conclusion(saturated, span_s=10)


def test_the_share_of_failed_requests_is_said_whenever_any_failed() -> None:
    """Issue 38 (23rd pass M3): 25% failed read only as "missed (75% within)"."""
    probes = (Probe(4, True, True, 900.0, 0.5), Probe(8, False, True, 950.0, 2.0, failed=0.25),
              Probe(6, False, True, 900.0, 1.5, failed=0.004))  # fmt: skip
    found = Capacity(LoadKind.CONCURRENCY, CapacityStop.BUDGET, 4, 6, None, True, probes)
    words = conclusion(found)
    assert "; 25% of the requests failed at C8, <1% at C6 (a failed request counts" in words
    clean = Capacity(LoadKind.CONCURRENCY, CapacityStop.BUDGET, 4, 6, None, True, probes[:1])
    assert "failed" not in conclusion(clean)


def test_a_rate_not_sustained_is_said_with_what_was_served_and_the_in_flight_limit() -> None:
    """Issue 38 (24th pass H2): "saturated at 150 req/s" while ~72 were served; the in-flight
    limit (--concurrency 8) reached was never said."""
    kept = {"met": True, "sure": True, "throughput": 4600.0, "ratio": 0.1}
    probes = (rate_probe(150.0, **kept, served=72.14, capped=True),  # type: ignore[arg-type]
              rate_probe(75.0, **kept, served=70.0),  # type: ignore[arg-type]
              rate_probe(70.0, **kept, served=70.0))  # type: ignore[arg-type]  # fmt: skip
    assert served_text(probes[0], 8) == (
        "not sustained: served 72.1 of 150 req/s, all 8 in flight (--concurrency)"
    )
    assert served_text(probes[1]) == served_text(probes[2]) == ""  # 93%: sustained
    found = conclude(probes, kind=LoadKind.RATE)
    assert found.capacity == 70.0 and found.offered == 75.0 and found.above == 150.0
    words = conclusion(found, in_flight=8)
    assert "the SLO holds at 70 req/s (served, of 75 req/s offered), not at 150 req/s" in words
    assert "; not sustained: served 72.1 of 150 req/s, all 8 in flight" in words
    assert "asked for at most 8 at once (--concurrency 8); raise it" in words
    assert "saturated" not in words
    uncapped = conclude((probes[2], replace(probes[0], capped=False)), kind=LoadKind.RATE)
    assert "--concurrency" not in conclusion(uncapped, in_flight=8)


def test_rates_from_a_thousand_are_written_whole_with_separators() -> None:
    """L1: a row read "1.02e+03 req/s"."""
    assert load_text(LoadKind.RATE, 1024.0) == "1,024 req/s"
    assert load_text(LoadKind.RATE, 1e6) == "1,000,000 req/s"
    assert load_text(LoadKind.RATE, 999.4) == "999 req/s"
    assert load_text(LoadKind.RATE, math.inf) == "inf req/s"
