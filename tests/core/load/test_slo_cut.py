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
    assert (ttft.n, ttft.within, ttft.unknown) == (51, 51, 0) and ttft.met  # its TTFT came
    assert judged.met and (judged.requests, judged.good) == (51, 50)  # sent, cut: never good
    assert m.run_metrics(records, slo=slo).n_failed == 0


def test_a_cut_request_not_known_yet_is_counted_outside_and_its_miss_is_not_sure() -> None:
    """Four requests cut waiting under every limit: never left out (a deadline that cut the slow
    ones would leave only the fast to judge): met only if it holds with them outside; here it
    does not, and the miss they could turn is not sure."""
    slo = parse_slo("ttft_p99=2s,e2e_p99=5s,tpot_p99=100ms")
    records = [_answered(50.0) for _ in range(20)] + [_cut(1500.0) for _ in range(4)]
    judged = m.slo_attainment(records, slo)
    assert [(o.n, o.within, o.unknown) for o in judged.objectives] == [(20, 20, 4)] * 3
    assert not judged.met and not any(o.sure for o in judged.objectives)
    never_sent = [_answered(50.0) for _ in range(20)] + [_cut(9000.0, sent=False)]
    left = m.slo_attainment(never_sent, slo)
    assert left.met and left.objectives[0].unknown == 0  # the client's, not the server's


def test_a_stalled_decode_cut_by_the_deadline_never_reads_met() -> None:
    """The 29th pass: a decode stopped mid-run, its 16 streams cut after stalling 5 s: a TPOT is
    not known before the end, so they are outside (761 of 777: missed), never left out (met)."""
    slo = parse_slo("tpot_p99=20ms")
    stalled = [_cut(5100.0, ttft_ms=40.0, gap_ms=10.0) for _ in range(16)]
    for record in stalled:  # six tokens, then nothing for 5 s
        record.event_ns, record.event_tokens = record.event_ns[:6], [1] * 6
    judged = m.slo_attainment([_answered(50.0) for _ in range(761)] + stalled, slo)
    (tpot,) = judged.objectives
    assert (tpot.n, tpot.within, tpot.unknown) == (761, 761, 16) and not tpot.met
    assert not tpot.sure  # had they ended within, it would hold: a miss not proved


def test_a_deadline_under_the_limit_never_leaves_only_the_fast_to_judge() -> None:
    """The 29th pass: `--deadline 2.9` under `e2e_p90=3s` cut every long request; the run was
    judged met on the 59 short ones."""
    slo = parse_slo("e2e_p90=3s")
    fast = [_answered(50.0, tokens=8) for _ in range(59)]
    cut = [_cut(2900.0, ttft_ms=40.0) for _ in range(64)]
    judged = m.slo_attainment(fast + cut, slo)
    assert (judged.objectives[0].within, judged.objectives[0].unknown) == (59, 64)
    assert not judged.met and not judged.sure


def test_a_cut_request_whose_wait_alone_passed_the_limit_is_a_miss() -> None:
    slo = parse_slo("ttft_p99=2s")
    records = [_answered(50.0) for _ in range(20)] + [_cut(2500.0)]  # no first token in 2.5 s
    judged = m.slo_attainment(records, slo)
    assert (judged.objectives[0].n, judged.objectives[0].within) == (21, 20)
    assert judged.objectives[0].unknown == 0 and not judged.met
    assert (judged.requests, judged.good) == (21, 20)
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
    """600 within and one cut request waiting under the limit: met with it outside too (600 of
    601 over 99%), and as sure as its interval (with it outside) says."""
    slo = parse_slo("ttft_p99=2s")
    judged = m.slo_attainment([_answered(50.0) for _ in range(600)] + [_cut(100.0)], slo)
    (ttft,) = judged.objectives
    assert (ttft.n, ttft.within, ttft.unknown) == (600, 600, 1) and ttft.met and ttft.sure
    healthy = m.slo_attainment([_answered(50.0) for _ in range(400)], slo).objectives[0]
    assert healthy.sure and healthy.unknown == 0
