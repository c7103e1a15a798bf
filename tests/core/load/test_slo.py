"""SLOs: the ``--slo`` text, each objective judged on a run (share within, its exact interval,
the percentile), a request's own verdict (goodput) and the run's."""

from __future__ import annotations

import math

import pytest

from servelab.core.load import metrics as m
from servelab.core.load.records import RequestRecord
from servelab.core.load.slo import (
    SLO,
    Objective,
    SloMetric,
    exact,
    parse_duration_ms,
    parse_slo,
)

MS = 1_000_000


def _request(
    ttft_ms: float, gaps_ms: tuple[float, ...] = (10.0,), ok: bool = True
) -> RequestRecord:
    times = [ttft_ms]
    for gap in gaps_ms:
        times.append(times[-1] + gap)
    record = RequestRecord(index=0, scheduled_ns=0, sent_ns=0, status=200,
                           event_ns=[round(t * MS) for t in times], event_tokens=[1] * len(times),
                           output_tokens=len(times), end_ns=round(times[-1] * MS))  # fmt: skip
    if not ok:
        record.fail("http 500")
    return record


def test_the_text_form_reads_any_percentile_and_unit() -> None:
    slo = parse_slo("ttft_p99=2s, itl_p99.9=60ms,e2e_p50=1.5min,tpot_p90=500us")
    assert slo.objectives == (
        Objective(SloMetric.TTFT, 99, 2000),
        Objective(SloMetric.ITL, 99.9, 60),
        Objective(SloMetric.E2E, 50, 90_000),
        Objective(SloMetric.TPOT, 90, 0.5),
    )
    assert parse_slo(slo.text) == slo
    assert slo.objectives[1].share == pytest.approx(0.999)
    assert parse_duration_ms("2s") == 2000.0
    # the micro sign and the Greek mu, as the refusal words the lower limit ("from 1us"; 1 µs)
    assert parse_duration_ms("1\u00b5s") == parse_duration_ms("1\u03bcs") == 1e-3
    assert parse_slo("ttft_p99=1\u00b5s").objectives == (Objective(SloMetric.TTFT, 99, 1e-3),)


@pytest.mark.parametrize(
    "text",
    ["", "ttft=2s", "ttft_p99=2", "ttft_p99=2h", "ttft_p100=2s", "ttft_p0=2s", "ttfb_p99=2s",
     "ttft_p99=0ms", "ttft_p99=2s,ttft_p99=3s", "ttft_p99=infs", "ttft_p99=-1s"],
)  # fmt: skip
def test_what_is_not_an_slo_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_slo(text)


def test_an_objective_is_met_when_its_share_is_within_and_sure_by_its_interval() -> None:
    fast = [_request(100) for _ in range(299)]
    records = [*fast, _request(5000)]
    att = m.slo_attainment(records, parse_slo("ttft_p99=2s"))
    (ttft,) = att.objectives
    assert (ttft.n, ttft.within) == (300, 299)
    assert ttft.met and ttft.attainment == pytest.approx(299 / 300)
    assert ttft.value_ms == pytest.approx(100.0)  # the run's p99 (type 7)
    # 299 of 300: the 95% Clopper-Pearson interval is [0.9816, 0.9999]: met, not surely
    assert ttft.low == pytest.approx(0.98157, abs=1e-4) and ttft.high > 0.9999
    assert not ttft.sure and att.met and not att.sure
    many = m.slo_attainment([_request(100)] * 2000, parse_slo("ttft_p99=2s"))
    assert many.objectives[0].sure and many.sure


def test_a_missed_objective_and_failed_requests_count_outside() -> None:
    records = [_request(100)] * 90 + [_request(100, ok=False)] * 10
    att = m.slo_attainment(records, parse_slo("ttft_p99=2s,e2e_p50=1s"))
    ttft, e2e = att.objectives
    assert (ttft.n, ttft.within, ttft.met, ttft.sure) == (100, 90, False, True)
    assert e2e.met and e2e.sure  # 90% within: p50 holds, surely
    assert (att.requests, att.good, att.met) == (100, 90, False)
    assert att.attainment == pytest.approx(0.9)


def test_itl_is_judged_per_gap_and_a_request_by_its_own_gaps() -> None:
    steady = _request(50, gaps_ms=(10,) * 199)
    hiccup = _request(50, gaps_ms=(10,) * 198 + (500,))  # one gap of 199 over 60 ms: 99.5%
    stutter = _request(50, gaps_ms=(10,) * 190 + (500,) * 9)
    slo = parse_slo("itl_p99=60ms")
    assert m.meets_slo(steady, slo) and m.meets_slo(hiccup, slo)
    assert not m.meets_slo(stutter, slo)
    att = m.slo_attainment([steady, hiccup, stutter], slo)
    (itl,) = att.objectives
    assert (itl.n, itl.within) == (597, 587) and not itl.met
    assert att.good == 2


def test_a_request_without_content_misses_ttft_but_a_single_token_has_no_tpot() -> None:
    empty = RequestRecord(index=0, scheduled_ns=0, status=200, end_ns=5 * MS)
    one = _request(10, gaps_ms=())
    assert not m.meets_slo(empty, parse_slo("ttft_p99=1s"))
    assert m.meets_slo(one, parse_slo("tpot_p99=1ms"))
    att = m.slo_attainment([empty, one], parse_slo("tpot_p99=1ms,ttft_p99=1s"))
    tpot, ttft = att.objectives
    assert (tpot.n, ttft.n, ttft.within) == (0, 2, 1)
    assert math.isnan(tpot.attainment) and not tpot.met and not tpot.sure


def test_warmups_are_not_judged() -> None:
    warm = _request(5000)
    warm.warmup = True
    att = m.slo_attainment([warm, _request(10)], SLO((Objective(SloMetric.TTFT, 99, 100),)))
    assert (att.requests, att.good) == (1, 1)


@pytest.mark.parametrize(
    "text",
    ["ttft_p99.99999=2s", "itl_p0.00001=1234567ms", "e2e_p99.9999999999=1e-5s",
     "tpot_p33.333333333=0.123456789ms"],
)  # fmt: skip
def test_every_percentile_and_limit_is_shown_exactly_as_the_parser_reads_it(text: str) -> None:
    """Defect 22 (issue 38): ttft_p99.99999=2s was shown as "p100", a value the parser refuses:
    the text form keeps every digit, and reads back as the same SLO."""
    slo = parse_slo(text)
    assert parse_slo(slo.text) == slo
    assert "p100" not in slo.text and "e" not in slo.text.split("_p")[1].split("=")[0]
    assert exact(99.99999) == "99.99999" and exact(2000.0) == "2000" and exact(1e-05) == "0.00001"


@pytest.mark.parametrize("text", ["e2e_p50=1e-300ms", "ttft_p99=0.5us", "ttft_p99=1e6min"])
def test_a_limit_no_clock_measures_or_no_request_waits_is_refused(text: str) -> None:
    """The ninth pass: ``e2e_p50=1e-300ms`` was accepted (a limit no request can meet, read as
    an SLO missed by every request); a limit is from 1 µs to 24 h, said in the error."""
    with pytest.raises(ValueError, match="from 1us to 24h"):
        parse_slo(text)


def test_the_limits_bounds_themselves_are_accepted() -> None:
    assert (
        parse_slo("ttft_p99=1us,e2e_p99=24h".replace("24h", "1440min")).objectives[1].limit_ms
        == 86_400_000
    )
