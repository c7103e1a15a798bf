"""The capacity search on modelled deployments: bracketed by bisection, saturation, a ceiling,
never met, a rate, the budget; the estimate and how sure it is."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from servelab.core.load.capacity import (
    FAILED_SHARE,
    PROBE_REQUESTS,
    PROBE_SPAN_S,
    PROBES,
    Capacity,
    CapacityStop,
    LoadKind,
    Probe,
    conclude,
    first_warmup,
    next_load,
    rate_limit,
    rate_probe,
    rate_requests,
)


def _search(
    model: Callable[[float], Probe],
    *,
    start: float,
    kind: LoadKind = LoadKind.CONCURRENCY,
    ceiling: float | None = None,
    limit: float | None = None,
) -> Capacity:
    probes: list[Probe] = []
    while (
        load := next_load(probes, start=start, kind=kind, ceiling=ceiling, limit=limit)
    ) is not None:
        probes.append(model(load))
    return conclude(probes, kind=kind, ceiling=ceiling, limit=limit)


def _latency_bound(limit_load: float, sat: float = 1e9) -> Callable[[float], Probe]:
    """A deployment whose binding latency grows linearly with load, crossing the limit at
    ``limit_load``; throughput grows with load up to ``sat``."""

    def probe(load: float) -> Probe:
        ratio = load / limit_load
        return Probe(load, ratio <= 1, abs(ratio - 1) > 0.002, min(load, sat) * 10, ratio)

    return probe


def test_a_latency_bound_capacity_is_bracketed_and_interpolated() -> None:
    found = _search(_latency_bound(57.3), start=1)
    assert found.stop == CapacityStop.BRACKETED
    assert (found.capacity, found.above) == (57, 58)
    assert found.estimate == pytest.approx(57.3)
    assert found.sure and len(found.probes) <= PROBES
    loads = [p.load for p in found.probes]
    assert loads[:7] == [1, 2, 4, 8, 16, 32, 64]  # the ramp, then bisection


def test_saturation_stops_the_ramp_at_the_load_before() -> None:
    found = _search(_latency_bound(10_000, sat=8), start=1)
    assert found.stop == CapacityStop.SATURATED
    assert found.capacity == 8 and found.above is None and found.estimate is None
    assert [p.load for p in found.probes] == [1, 2, 4, 8, 16]


def test_a_ceiling_ends_the_ramp() -> None:
    found = _search(_latency_bound(500), start=16, ceiling=48)
    assert found.stop == CapacityStop.CEILING
    assert [p.load for p in found.probes] == [16, 32, 48] and found.capacity == 48


def test_a_first_load_that_misses_is_halved_until_one_holds() -> None:
    found = _search(_latency_bound(5.5), start=64)
    assert found.stop == CapacityStop.BRACKETED and (found.capacity, found.above) == (5, 6)
    never = _search(_latency_bound(0.5), start=8)
    assert never.stop == CapacityStop.NEVER_MET and never.capacity is None
    assert [p.load for p in never.probes] == [8, 4, 2, 1]


def test_a_rate_is_bracketed_within_the_resolution() -> None:
    found = _search(_latency_bound(13.7), start=1.0, kind=LoadKind.RATE)
    assert found.stop == CapacityStop.BRACKETED
    assert found.capacity is not None and found.above is not None
    assert found.capacity <= 13.7 < found.above <= found.capacity * 1.03
    assert found.estimate == pytest.approx(13.7)


def test_an_unsure_end_makes_the_result_unsure_and_the_budget_bounds_the_search() -> None:
    found = _search(_latency_bound(57.0), start=1)
    assert found.capacity == 57 and not found.sure  # 57 sits right on the limit
    flat_never = _search(lambda load: Probe(load, False, True, 1.0, 2.0), start=1000.0,
                         kind=LoadKind.RATE)  # fmt: skip
    assert len(flat_never.probes) == PROBES and flat_never.stop == CapacityStop.NEVER_MET


def test_an_interrupted_search_says_so() -> None:
    probe = _latency_bound(30)
    found = conclude([probe(1), probe(2)], kind=LoadKind.CONCURRENCY, interrupted=True)
    assert found.stop == CapacityStop.INTERRUPTED and found.capacity == 2


def _requests_bound(requests: int) -> Callable[[float], Probe]:
    """A deployment far from its capacity, driven by ``requests`` requests per probe: a
    concurrency above them keeps only ``requests`` in flight, so its throughput stops growing."""

    def probe(load: float) -> Probe:
        return Probe(load, True, True, min(load, requests) * 10, 0.01)

    return probe


def test_a_concurrency_the_requests_cannot_fill_is_no_evidence_of_saturation() -> None:
    """Defect 8 (issue 38): with 4 requests per probe, C8 has at most 4 in flight, so C4 -> C8
    barely raising the throughput said "saturated at C4". The ramp stops at the requests and
    says the search was limited by them."""
    found = _search(_requests_bound(4), start=1, limit=4)
    assert found.stop == CapacityStop.LIMITED
    assert [p.load for p in found.probes] == [1, 2, 4]
    assert found.capacity == 4 and found.above is None and found.limit == 4
    uneven = _search(_requests_bound(6), start=1, limit=6)
    assert [p.load for p in uneven.probes] == [1, 2, 4, 6] and uneven.stop == CapacityStop.LIMITED


def test_probes_over_the_limit_are_compared_as_they_ran() -> None:
    """Defect 8 (issue 38): the saturation rule caps each load at the requests it sent."""
    probes = [Probe(4, True, True, 40.0, 0.1), Probe(8, True, True, 40.0, 0.1)]
    assert conclude(probes, kind=LoadKind.CONCURRENCY).stop == CapacityStop.SATURATED
    limited = conclude(probes, kind=LoadKind.CONCURRENCY, limit=4)
    assert limited.stop == CapacityStop.LIMITED and limited.capacity == 8


def test_a_real_saturation_below_the_limit_is_still_found() -> None:
    """Defect 8 (issue 38): the limit does not hide a saturation the requests could show."""
    found = _search(_latency_bound(10_000, sat=8), start=1, limit=64)
    assert found.stop == CapacityStop.SATURATED and found.capacity == 8
    ceiling_first = _search(_latency_bound(500), start=16, ceiling=48, limit=100)
    assert ceiling_first.stop == CapacityStop.CEILING


def _cold_first(warm: Callable[[float], Probe]) -> Callable[[float], Probe]:
    """``warm``, but the first probe pays a one-time warm-up: it misses, far over its limit."""
    ran: list[float] = []

    def probe(load: float) -> Probe:
        ran.append(load)
        if len(ran) == 1:
            return Probe(load, False, True, load * 10, 8.5)
        return warm(load)

    return probe


def test_a_cold_first_miss_is_probed_again_once_a_lower_load_held() -> None:
    """Issue 38 (22nd pass H1): C8 missed cold, C4 held: C8 is probed again at once, holds, and
    the ramp goes on from it (before: C6, C7 held and "capacity C7: not at C8")."""
    found = _search(_cold_first(_latency_bound(57.3)), start=8, ceiling=64)
    loads = [p.load for p in found.probes]
    assert loads[:5] == [8, 4, 8, 16, 32], loads
    assert found.stop == CapacityStop.BRACKETED and (found.capacity, found.above) == (57, 58)
    assert loads.count(8) == 2 and len(found.probes) <= PROBES


def test_a_miss_probed_again_that_misses_again_stands_and_is_not_probed_a_third_time() -> None:
    found = _search(_latency_bound(5.5), start=8)
    loads = [p.load for p in found.probes]
    assert loads == [8, 4, 8, 6, 5], loads
    assert found.stop == CapacityStop.BRACKETED and (found.capacity, found.above) == (5, 6)


def test_a_cold_miss_that_misses_again_stands_and_bisection_goes_on() -> None:
    found = _search(_cold_first(_latency_bound(40.5)), start=64, ceiling=64)
    loads = [p.load for p in found.probes]
    assert loads[:4] == [64, 32, 64, 48], loads  # 64 again: it bounds [32, 64], then bisection
    assert (found.capacity, found.above) == (40, 41) and loads.count(64) == 2


def test_a_miss_above_a_load_that_already_held_is_not_probed_again() -> None:
    """Bisection's misses ran on a warm deployment (a lower load had held): no second look."""
    found = _search(_latency_bound(57.3), start=1)
    assert len({p.load for p in found.probes}) == len(found.probes)


def test_the_verdict_takes_a_load_by_its_latest_probe() -> None:
    cold, warm = Probe(8, False, True, 80, 8.5), Probe(8, True, True, 90, 0.4)
    held = Probe(4, True, True, 40, 0.2)
    found = conclude([cold, held, warm], kind=LoadKind.CONCURRENCY, ceiling=8)
    assert found.stop == CapacityStop.CEILING and found.capacity == 8 and found.above is None
    assert next_load([cold, held], start=8, kind=LoadKind.CONCURRENCY, ceiling=8) == 8


def test_the_first_probe_s_warm_up_is_one_request_per_user_within_the_requests() -> None:
    assert first_warmup(LoadKind.CONCURRENCY, 8, 64) == 8
    assert first_warmup(LoadKind.CONCURRENCY, 128, 64) == 64
    assert first_warmup(LoadKind.RATE, 2.5, 64) == 3
    assert first_warmup(LoadKind.RATE, 0.01, 64) == 1


def test_a_probe_whose_requests_mostly_failed_ends_the_search_with_no_verdict() -> None:
    """Issue 38 (22nd pass M2): a killed decode's probes were taken for misses down to C1."""
    held = Probe(8, True, True, 80, 0.5)
    dead = Probe(16, False, True, 0.0, math.nan, failed=1.0)
    assert next_load([held, dead], start=8, kind=LoadKind.CONCURRENCY) is None
    found = conclude([held, dead], kind=LoadKind.CONCURRENCY)
    assert found.stop == CapacityStop.FAILED and found.capacity is None and found.above is None
    assert not found.sure and found.estimate is None
    some = Probe(16, False, True, 40.0, 1.5, failed=FAILED_SHARE)  # half failed: still a miss
    assert conclude([held, some], kind=LoadKind.CONCURRENCY).stop != CapacityStop.FAILED


def _bursty(sustained: float, requests: int) -> Callable[[float], Probe]:
    """A deployment that serves ``sustained`` req/s and absorbs any burst shorter than 1 s (its
    in-flight cap, its batch): a probe at ``rate`` sends :func:`rate_requests` requests; the
    throughput follows the rate it can serve (a burst's: its requests over a second)."""

    def probe(rate: float) -> Probe:
        n = rate_requests(rate, requests)
        burst = n / rate < 1
        ratio = 0.1 if burst else rate / sustained
        served = n if burst else min(rate, sustained)
        return Probe(rate, ratio <= 1, True, served * 10, ratio)

    return probe


def test_a_rate_probe_sustains_its_rate_for_the_span() -> None:
    """Issue 38 (23rd pass H1): 100 requests at 256 req/s were a 0.4 s burst."""
    assert rate_requests(256, 100) == math.ceil(256 * PROBE_SPAN_S)
    assert rate_requests(4, 100) == 100  # --requests already sustain 25 s
    assert rate_requests(1e6, 100) == PROBE_REQUESTS  # the most a probe sends
    assert rate_requests(1e6, 5000) == 5000  # unless more were asked
    assert rate_requests(3, 10, span_s=2) == 10 and rate_requests(30, 10, span_s=2) == 60
    for odd in (math.nan, math.inf, 0.0, -1.0):
        assert rate_requests(odd, 100) == 100
    assert rate_limit(100) == PROBE_REQUESTS / PROBE_SPAN_S and rate_limit(5000) == 500


def test_a_rate_search_brackets_what_the_deployment_sustains_not_a_burst() -> None:
    """The H1 defect: every probe a burst, every probe "met", the burst's throughput flat: read
    as "saturated at 256 req/s" on a deployment sustaining 150. With sustained probes (and the
    limit the most requests allow), the search brackets 150."""
    model = _bursty(150, requests=100)
    found = _search(model, start=4, kind=LoadKind.RATE, limit=rate_limit(100))
    assert found.stop == CapacityStop.BRACKETED, [(p.load, p.met) for p in found.probes]
    assert found.capacity is not None and 140 <= found.capacity <= 150 < found.above  # type: ignore[operator]
    assert all(rate_requests(p.load, 100) >= p.load * PROBE_SPAN_S for p in found.probes)


def test_a_rate_above_what_the_probes_sustain_is_not_searched_nor_called_saturated() -> None:
    """Above the rate :data:`PROBE_REQUESTS` sustain for the span, the search stops "limited"
    (no claim above it), never "saturated" on probes that were bursts."""
    top = rate_limit(100)
    found = _search(_bursty(10_000, requests=100), start=4, kind=LoadKind.RATE, limit=top)
    assert found.stop == CapacityStop.LIMITED and found.capacity == top
    assert max(p.load for p in found.probes) == top
    more = _search(_bursty(10_000, requests=6000), start=4, kind=LoadKind.RATE,
                   limit=rate_limit(6000))  # fmt: skip
    assert more.stop == CapacityStop.LIMITED and more.capacity == 600


def _queueing(serves: float) -> Callable[[float], Probe]:
    """H2 (24th pass): a deployment behind an in-flight limit serving ``serves`` req/s; the SLO
    (p99 TTFT 60 s) holds within a probe's span whatever the rate (the queue waits 31 s at
    300 req/s), the throughput is what was served (64 tokens a request)."""

    def probe(rate: float) -> Probe:
        served = min(rate, serves)
        ratio = 0.1 + max(0.0, rate / serves - 1) * 0.3
        return rate_probe(rate, met=ratio <= 1, sure=True, throughput=served * 64, ratio=ratio,
                          served=served, capped=rate > serves)  # fmt: skip

    return probe


def test_a_rate_not_served_is_not_met_though_its_slo_held() -> None:
    """H2: 150 and 300 req/s met a loose SLO while ~72 were served: "saturated at 150 req/s".
    Their completions did not keep pace: not met, and the search brackets what is served."""
    found = _search(_queueing(72), start=150, kind=LoadKind.RATE, limit=rate_limit(16))
    assert found.stop == CapacityStop.BRACKETED, [(p.load, p.met) for p in found.probes]
    assert found.capacity is not None and found.above is not None
    assert 72 * 0.9 <= found.capacity <= 72 < found.above, found  # never above what was served
    assert found.offered is None or found.offered > found.capacity == 72
    assert found.sure and found.estimate is None  # no limit crossed at the upper end
    for p in found.probes:
        assert not p.met or (p.served is not None and p.served >= 0.9 * p.load), p
    top = found.probes[0]
    assert not top.met and top.sure and top.capped and math.isnan(top.ratio)


def test_a_rate_whose_slo_missed_and_was_not_served_keeps_the_slo_s_ratio() -> None:
    missed = rate_probe(100, met=False, sure=False, throughput=1.0, ratio=1.5, served=50)
    assert (missed.met, missed.sure, missed.ratio, missed.sustained) == (False, False, 1.5, False)
    kept = rate_probe(100, met=True, sure=False, throughput=1.0, ratio=0.5, served=95)
    assert (kept.met, kept.sure, kept.ratio) == (True, False, 0.5) and kept.sustained
    unmeasured = rate_probe(100, met=True, sure=True, throughput=1.0, ratio=0.5, served=None)
    assert unmeasured.met and unmeasured.sustained
    assert Probe(8, True, True, 1.0, 0.5).sustained  # a concurrency: no rate to serve


def test_two_rates_not_served_are_never_saturated() -> None:
    """Saturation needs both probes met: a doubled rate neither served is no saturation."""
    held = {"met": True, "sure": True, "throughput": 4600.0, "served": 72.0}
    probes = [rate_probe(150, ratio=0.18, **held), rate_probe(300, ratio=0.52, **held)]  # type: ignore[arg-type]
    found = conclude(probes, kind=LoadKind.RATE)
    assert found.stop != CapacityStop.SATURATED and found.capacity is None, found
