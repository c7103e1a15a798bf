"""Metrics on hand-built records: TTFT from the scheduled send, gaps, TPOT, throughput, goodput."""

from __future__ import annotations

import pytest

from servelab.core.load import metrics as m
from servelab.core.load.records import RequestRecord
from servelab.core.load.slo import parse_slo

MS = 1_000_000


def _record(
    scheduled: int = 0, sent: int = 5, events: tuple[tuple[int, int], ...] = (), end: int = 100
) -> RequestRecord:
    return RequestRecord(
        index=0,
        scheduled_ns=scheduled * MS,
        sent_ns=sent * MS,
        end_ns=end * MS,
        status=200,
        event_ns=[t * MS for t, _ in events],
        event_tokens=[n for _, n in events],
        output_tokens=sum(n for _, n in events),
    )


EVENTS = ((20, 0), (30, 1), (50, 1), (55, 2), (80, 1), (81, 0))


def test_ttft_skips_empty_role_chunk_and_counts_from_scheduled() -> None:
    record = _record(events=EVENTS)
    assert m.ttft_ns(record) == 30 * MS
    assert m.dispatch_delay_ns(record) == 5 * MS


def test_gaps_exclude_ttft_and_contentless_events() -> None:
    record = _record(events=EVENTS)
    assert m.gaps_ns(record) == [20 * MS, 5 * MS, 25 * MS]
    assert m.itl_ns(record) == pytest.approx(50 / 3 * MS)
    assert m.tpot_ns(record) == pytest.approx((100 - 30) / 4 * MS)
    assert m.e2e_ns(record) == 100 * MS


def test_no_content_means_no_ttft() -> None:
    record = _record(events=((10, 0),))
    assert m.ttft_ns(record) is None
    assert m.tpot_ns(record) is None
    assert m.itl_ns(record) is None


def test_run_metrics_throughput_and_goodput() -> None:
    fast = _record(events=EVENTS, end=100)
    slow = _record(events=((400, 1), (900, 1)), end=1000)
    failed = _record(events=EVENTS)
    failed.fail("http 500")
    run = m.run_metrics([fast, slow, failed], slo=parse_slo("ttft_p99=100ms"))
    assert (run.n_requests, run.n_ok, run.n_failed) == (3, 2, 1)
    assert run.duration_s == pytest.approx(1.0)
    assert run.output_tokens == 7
    assert run.output_throughput == pytest.approx(7.0)
    assert run.goodput == pytest.approx(1.0)
    assert m.failures_by_reason([fast, failed]) == {"http 500": 1}


def test_warmup_records_are_excluded() -> None:
    warm = _record(events=EVENTS)
    warm.warmup = True
    assert m.run_metrics([warm]).n_requests == 0


def test_steady_window_is_from_full_concurrency_to_the_last_send() -> None:
    """In flight: 1 from 1, 2 from 10, 3 from 40 (the first ends at 41), ..."""
    # C2, 4 requests: sends at 1, 10 (both slots busy from 10), 40, 60 (last send)
    records = [_record(scheduled=t, sent=t, end=t + 40) for t in (1, 10, 40, 60)]
    assert m.steady_window_ns(records, 2) == (10 * MS, 60 * MS)
    assert m.steady_window_ns(records, 3) == (40 * MS, 60 * MS)
    assert m.steady_window_ns(records, 4) is None  # never 4 in flight: no steady state
    assert m.steady_window_ns([], 1) is None


def test_steady_throughput_counts_only_tokens_inside_the_window() -> None:
    a = _record(sent=1, events=((5, 1), (15, 1), (25, 1)), end=30)
    b = _record(sent=10, events=((20, 1), (30, 1), (62, 5)), end=70)
    c = _record(sent=40, events=((45, 1), (55, 2)), end=60)
    d = _record(sent=60, events=((65, 1),), end=70)
    assert m.tokens_between([a, b, c, d], 10 * MS, 60 * MS) == 1 + 1 + 1 + 1 + 1 + 2
    run = m.run_metrics([a, b, c, d], concurrency=2)
    assert run.steady_window_s == pytest.approx(0.050)
    assert run.steady_throughput == pytest.approx(7 / 0.050)
    assert m.run_metrics([a, b, c, d]).steady_throughput is None  # open loop: no steady window
