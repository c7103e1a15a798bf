"""A source's scrapes summarized: deltas, rates, quantiles, gauges; unknown is never healthy."""

from __future__ import annotations

import pytest

from servelab.core.ledger.codec import decode, encode
from servelab.core.telemetry import summary as telemetry
from servelab.core.telemetry.promtext import parse_exposition
from servelab.core.telemetry.summary import (
    MetricsSource,
    RunTelemetry,
    Scrape,
    SourceTelemetry,
    generated_tokens_per_s,
    series_name,
    summarize,
)

SRC = MetricsSource("decode", "engine", "http://127.0.0.1:1/metrics", "127.0.0.1:1")


def test_public_api() -> None:
    assert "summarize" in telemetry.__all__ and "RunTelemetry" in telemetry.__all__


def test_series_names_sort_labels() -> None:
    assert series_name("a", ()) == "a"
    assert series_name("a", (("z", "1"), ("b", "2"))) == 'a{b="2",z="1"}'


def test_counters_rates_and_gauges() -> None:
    scrapes = [
        Scrape(0.0, parse_exposition('r_total{w="1"} 5\nrunning 0\n')),
        Scrape(1.0, parse_exposition('r_total{w="1"} 9\nrunning 4\n')),
        Scrape(2.0, parse_exposition('r_total{w="1"} 15\nrunning 0\n')),
    ]
    got = summarize(SRC, scrapes, 2.0)
    assert got.state == "ok" and got.scrapes == 3
    assert got.counter("r_total", w="1") == 10.0
    assert got.counter("r_total") == 10.0
    assert got.rates['r_total{w="1"}'] == pytest.approx(5.0)
    assert got.gauges["running"] == [(0.0, 0.0), (1.0, 4.0), (2.0, 0.0)]
    assert got.counter("absent_total") is None


def test_a_source_that_never_answered_is_unknown_with_its_reason() -> None:
    scrapes = [Scrape(0.0, None, "HTTP 404 Not Found"), Scrape(1.0, None, "HTTP 404 Not Found")]
    got = summarize(SRC, scrapes, 1.0)
    assert got.state == "unknown" and got.reason == "HTTP 404 Not Found"
    assert got.counters == {} and got.counter("sglang:num_requests_total") is None
    one = summarize(SRC, [Scrape(0.0, parse_exposition("a_total 1\n"))], 1.0)
    assert one.state == "unknown"  # one answer cannot bound a run


def test_round_trip_through_json() -> None:
    scrapes = [Scrape(0.0, parse_exposition("a_total 1\ng 2\n")),
               Scrape(1.0, parse_exposition("a_total 4\ng 3\n"))]  # fmt: skip
    run = RunTelemetry("scrape", 1.0, (summarize(SRC, scrapes, 1.0),))
    again = decode(RunTelemetry, encode(run))
    assert again == run
    assert again.source("decode") is not None and again.unknown == []


def test_generated_tokens_per_s_sums_the_decodes_own_counters() -> None:
    def source(name: str, text_before: str, text_after: str) -> SourceTelemetry:
        scrapes = [
            Scrape(0.0, parse_exposition(text_before)),
            Scrape(2.0, parse_exposition(text_after)),
        ]
        return summarize(MetricsSource(name, "engine", "u"), scrapes, 2.0)

    d0 = source(
        "decode", "sglang:generation_tokens_total 10\n", "sglang:generation_tokens_total 210\n"
    )
    d1 = source("decode-2", 'vllm:generation_tokens_total{engine="0"} 0\n',
                'vllm:generation_tokens_total{engine="0"} 100\n')  # fmt: skip
    prefill = source(
        "prefill", "sglang:generation_tokens_total 0\n", "sglang:generation_tokens_total 99\n"
    )
    gone = SourceTelemetry("decode-3", "engine", "u", "unknown", "HTTP 404")
    run = RunTelemetry("scrape", 2.0, (d0, d1, prefill, gone))
    assert generated_tokens_per_s(run, ["decode", "decode-2", "decode-3"]) == pytest.approx(150.0)
    assert generated_tokens_per_s(run, ["decode-3"]) is None  # unknown, never zero
