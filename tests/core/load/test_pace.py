"""Issue 38 (24th pass H2, 25th pass H1): the rate a probe served, apart from its latencies; a
healthy probe of long requests is not failed by its drain; a queue growing through the probe is,
and so is a batch that slows every admitted request together (its completions bunch up)."""

from __future__ import annotations

import math

from servelab.core.load.pace import (
    MIN_PACED,
    SUSTAINED_SHARE,
    in_flight_peak,
    served_rate,
    sustained,
)
from servelab.core.load.records import RequestRecord

S = 1_000_000_000


def _record(i: int, arrival_s: float, sent_s: float, end_s: float | None) -> RequestRecord:
    """Times from a clock at 1 s (a sent_ns of 0 is a request never sent)."""
    end = None if end_s is None else round((1 + end_s) * S)
    return RequestRecord(i, round((1 + arrival_s) * S), sent_ns=round((1 + sent_s) * S), status=200,
                         end_ns=end, output_tokens=64)  # fmt: skip


def _healthy(rate: float, span_s: float, latency_s: float) -> list[RequestRecord]:
    """Every request answered ``latency_s`` (give or take a tenth) after it arrived."""
    n = round(rate * span_s)
    return [_record(i, i / rate, i / rate, i / rate + latency_s * (1 + 0.1 * (i % 3 - 1)))
            for i in range(n)]  # fmt: skip


def _queued(rate: float, span_s: float, serves: float, service_s: float) -> list[RequestRecord]:
    """A deployment answering ``serves`` req/s, first come first served: a queue grows."""
    records, free = [], 0.0
    for i in range(round(rate * span_s)):
        arrival = i / rate
        start = max(arrival, free)
        free = start + 1 / serves
        records.append(_record(i, arrival, start, start + service_s))
    return records


def test_a_healthy_probe_of_long_requests_is_sustained_whatever_its_drain() -> None:
    """10 s of arrivals at 20 req/s, each answered in ~5 s: the run lasts 15 s, so requests over
    the run's duration read 13.3 req/s (67%), completions within the span 10 req/s (50%)."""
    records = _healthy(20, 10, 5.0)
    served = served_rate(20, records)
    assert served is not None and abs(served - 20) < 0.5, served
    assert sustained(20, served)
    short = served_rate(20, _healthy(20, 10, 0.05))
    assert short is not None and abs(short - 20) < 0.5


def test_a_queue_growing_through_the_probe_is_the_rate_served() -> None:
    """H2: 150 req/s offered, ~72 served: the probe's p99 rose, its SLO (60 s) held."""
    served = served_rate(150, _queued(150, 10, 72, 0.9))
    assert served is not None and abs(served - 72) < 2, served
    assert not sustained(150, served)
    near = served_rate(100, _queued(100, 10, 95, 0.5))  # 95%: sustained, within the share
    assert near is not None and sustained(100, near), near
    assert SUSTAINED_SHARE == 0.9


def test_pace_needs_answered_requests_spread_over_time() -> None:
    assert served_rate(10, _healthy(10, (MIN_PACED - 1) / 10, 1)) is None
    assert served_rate(10, _healthy(10, MIN_PACED / 10, 1)) is not None
    at_once = [_record(i, 0, 0, 1 + i) for i in range(20)]
    assert served_rate(10, at_once) is None
    answered_at_once = [_record(i, i / 10, i / 10, 5) for i in range(20)]  # a stall, then all
    stalled = served_rate(10, answered_at_once)  # their tokens were not coming while they arrived
    assert stalled is not None and not sustained(10, stalled), stalled
    for odd in (math.nan, math.inf, 0.0, -1.0):
        assert served_rate(odd, _healthy(10, 2, 1)) is None
    failed = _healthy(10, 2, 1)
    for r in failed:
        r.fail("http_error")
    assert served_rate(10, failed) is None and sustained(10, None)
    unended = [_record(i, i / 10, i / 10, None) for i in range(20)]
    assert served_rate(10, unended) is None and in_flight_peak(unended) == 20


def test_the_in_flight_peak_counts_sent_requests_not_ended() -> None:
    assert in_flight_peak(_queued(150, 2, 72, 8 / 72)) == 8  # 8 slots, each busy 8/72 s
    assert in_flight_peak(_healthy(10, 2, 0.05)) == 1
    assert in_flight_peak([]) == 0


def _batched(rate: float, span_s: float, serves: float, tokens: int) -> list[RequestRecord]:
    """An engine that admits every request at once and shares ``serves × tokens`` tokens a second
    among all it holds (processor sharing, as a continuous batch slows every sequence): each
    request's tokens, as its stream's events, when its share of the work reaches them."""
    step, per_s = 0.02, serves * tokens
    n = round(rate * span_s)
    arrivals = [i / rate for i in range(n)]
    done = [0.0] * n
    records = [_record(i, a, a, None) for i, a in enumerate(arrivals)]
    active: list[int] = []
    t, nxt = 0.0, 0
    while nxt < n or active:
        while nxt < n and arrivals[nxt] <= t:
            active.append(nxt)
            nxt += 1
        if active:
            share = per_s * step / len(active)
            for i in list(active):
                before = int(done[i])
                done[i] = min(tokens, done[i] + share)
                record = records[i]
                for _ in range(before, int(done[i])):
                    record.event_ns.append(round((1 + t + step) * S))
                    record.event_tokens.append(1)
                if done[i] >= tokens:
                    record.end_ns = round((1 + t + step) * S)
                    record.first_byte_ns = record.event_ns[0]
                    active.remove(i)
        t += step
    return records


def test_a_batch_slowing_every_request_together_is_the_rate_served() -> None:
    """25th pass H1: 300 req/s offered to a batch that serves ~147 read "served 325": the early
    requests, slowed by the batch, ended nearly with the late ones. Tokens are work: 40 req/s
    offered to one serving 20 is served 20 (a tenth either way)."""
    records = _batched(40, 10, 20, 16)
    served = served_rate(40, records)
    assert served is not None and abs(served - 20) < 2, served
    assert not sustained(40, served)
    keeps = served_rate(15, _batched(15, 10, 20, 16))  # under what it serves: kept pace
    assert keeps is not None and sustained(15, keeps), keeps
