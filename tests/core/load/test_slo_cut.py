"""A request cut by the run's end (``--deadline``, a stop) judged against an SLO as far as it went
(the 28th hostile pass: cut requests counted as misses named "capacity 1.94 req/s" where every
probe's p99 TTFT was 17-64 ms against a 2 s limit)."""

from __future__ import annotations

from servelab.core.load import metrics as m
from servelab.core.load.records import FailReason, RequestRecord
from servelab.core.load.slo import parse_slo

MS = 1_000_000


def _answered(ttft_ms: float, gap_ms: float = 10.0, tokens: int = 4) -> RequestRecord:
    times = [ttft_ms + gap_ms * i for i in range(tokens)]
    return RequestRecord(index=0, scheduled_ns=0, sent_ns=1, status=200,
                         event_ns=[round(t * MS) for t in times], event_tokens=[1] * tokens,
                         output_tokens=tokens, end_ns=round(times[-1] * MS))  # fmt: skip


def _cut(
    waited_ms: float, ttft_ms: float | None = None, gap_ms: float = 10.0, sent: bool = True
) -> RequestRecord:
    """Cut after ``waited_ms`` from its scheduled send, its first token at ``ttft_ms`` (None:
    none came), then a token every ``gap_ms`` until the cut."""
    times: list[float] = []
    if ttft_ms is not None:
        t = ttft_ms
        while t < waited_ms:
            times.append(t)
            t += gap_ms
    record = RequestRecord(index=0, scheduled_ns=0, sent_ns=1 if sent else 0, status=200,
                           event_ns=[round(t * MS) for t in times], event_tokens=[1] * len(times),
                           output_tokens=len(times), end_ns=round(waited_ms * MS))  # fmt: skip
    record.fail(FailReason.DEADLINE, "the run deadline passed mid-request")
    return record


def test_a_cut_request_that_streamed_within_the_limit_is_no_miss() -> None:
    slo = parse_slo("ttft_p99=2s")
    records = [_answered(50.0) for _ in range(50)] + [_cut(900.0, ttft_ms=40.0)]
    judged = m.slo_attainment(records, slo)
    ttft = judged.objectives[0]
    assert (ttft.n, ttft.within) == (51, 51) and ttft.met  # its TTFT came: counted, within
    assert judged.met and (judged.requests, judged.good) == (50, 50)  # never good, not a miss
    assert m.run_metrics(records, slo=slo).n_failed == 0


def test_a_cut_request_waiting_under_the_limit_is_left_out() -> None:
    slo = parse_slo("ttft_p99=2s,e2e_p99=5s,tpot_p99=100ms")
    records = [_answered(50.0) for _ in range(20)] + [_cut(1500.0) for _ in range(4)]
    judged = m.slo_attainment(records, slo)
    assert [(o.n, o.within) for o in judged.objectives] == [(20, 20)] * 3
    assert judged.met and judged.requests == 20
    # ... but not surely met: the four, all outside, would turn it (20 of 24 under 99%)
    assert [o.unknown for o in judged.objectives] == [4, 4, 4] and not judged.sure
    never_sent = [_answered(50.0) for _ in range(20)] + [_cut(9000.0, sent=False)]
    assert m.slo_attainment(never_sent, slo).objectives[0].n == 20  # the client's, not a miss


def test_a_cut_request_whose_wait_alone_passed_the_limit_is_a_miss() -> None:
    slo = parse_slo("ttft_p99=2s")
    records = [_answered(50.0) for _ in range(20)] + [_cut(2500.0)]  # no first token in 2.5 s
    judged = m.slo_attainment(records, slo)
    assert (judged.objectives[0].n, judged.objectives[0].within) == (21, 20)
    assert not judged.met and (judged.requests, judged.good) == (21, 20)
    e2e = m.slo_attainment([_answered(50.0), _cut(7000.0, ttft_ms=40.0)], parse_slo("e2e_p50=5s"))
    assert (e2e.objectives[0].n, e2e.objectives[0].within) == (2, 1)


def test_a_cut_request_gives_its_gaps_and_an_open_gap_past_the_limit() -> None:
    slo = parse_slo("itl_p99=100ms")
    streaming = _cut(95.0, ttft_ms=40.0, gap_ms=10.0)  # 6 tokens, 5 gaps of 10 ms, open 5 ms
    judged = m.slo_attainment([streaming], slo).objectives[0]
    assert (judged.n, judged.within) == (5, 5)
    stalled = _cut(1000.0, ttft_ms=40.0, gap_ms=10.0)
    stalled.event_ns, stalled.event_tokens = stalled.event_ns[:3], [1, 1, 1]  # then 940 ms
    assert [(o.n, o.within) for o in m.slo_attainment([stalled], slo).objectives] == [(3, 2)]


def test_a_server_failure_is_still_a_miss() -> None:
    failed = _answered(50.0)
    failed.fail("http 500")
    judged = m.slo_attainment([_answered(50.0), failed], parse_slo("ttft_p50=2s"))
    assert (judged.objectives[0].n, judged.objectives[0].within) == (2, 1)
    assert (judged.requests, judged.good) == (2, 1)


def test_unknown_cut_requests_that_could_not_turn_the_verdict_leave_it_sure() -> None:
    """400 within and one cut request waiting under the limit: met with it outside too (400 of
    401 over 99%), so as sure as its interval says."""
    slo = parse_slo("ttft_p99=2s")
    judged = m.slo_attainment([_answered(50.0) for _ in range(400)] + [_cut(100.0)], slo)
    (ttft,) = judged.objectives
    assert (ttft.n, ttft.within, ttft.unknown) == (400, 400, 1) and ttft.met and ttft.sure
    healthy = m.slo_attainment([_answered(50.0) for _ in range(400)], slo).objectives[0]
    assert healthy.sure and healthy.unknown == 0
