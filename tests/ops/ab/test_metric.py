"""What an A/B compares (``ab --metric``): its levels, its design as stored (an older A/B's JSON
unchanged), a goodput of 0 leaves a level undecided instead of failing, the report's words, and
an A/B on capacity through the real router."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from servelab.core.ab.record import AbRunRecord
from servelab.core.ab.result import (
    CAPACITY_LEVEL,
    AbDesign,
    AbMetric,
    AbResult,
    ArmVisit,
    conclude,
    undecided_levels,
)
from servelab.core.ab.tunerun import TuneKnob
from servelab.core.bench.contract import BenchConfig
from servelab.core.bench.record import BenchRunRecord
from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.ledger.codec import decode, encode
from servelab.core.load.slo import parse_slo
from servelab.core.load.workload import LengthDist
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import load_spec
from servelab.ops.ab.ab import run_ab
from servelab.ops.ab.config import AbConfig
from servelab.ops.ab.tuneconfig import TuneConfig
from servelab.ops.deploy import deploy
from servelab.report.ab import ab_markdown, headline
from tests.support.specs import write_pd_spec

SLO = parse_slo("ttft_p90=1s")


def _config(metric: AbMetric, slo: bool = True) -> AbConfig:
    bench = BenchConfig(url="", concurrencies=(32, 64), slo=SLO if slo else None)
    return AbConfig("decode", "K", "256", "512", bench, metric=metric)


def test_each_metric_keys_its_values_and_records_itself() -> None:
    assert _config(AbMetric.THROUGHPUT).levels == (32, 64)
    assert _config(AbMetric.GOODPUT).levels == (32, 64)
    assert _config(AbMetric.CAPACITY).levels == (CAPACITY_LEVEL,)
    design = _config(AbMetric.CAPACITY).result(None).design
    assert (design.metric, design.slo, design.compared) == ("capacity", "ttft_p90=1000ms",
                                                            AbMetric.CAPACITY)  # fmt: skip
    plain = _config(AbMetric.THROUGHPUT, slo=False).result(None).design
    assert (plain.metric, plain.slo, plain.compared) == (None, None, AbMetric.THROUGHPUT)
    assert "metric" not in encode(plain) and "slo" not in encode(plain)  # as older A/Bs stored
    assert decode(AbDesign, encode(design)) == design
    with pytest.raises(ValueError, match="needs an SLO"):
        _config(AbMetric.GOODPUT, slo=False)
    with pytest.raises(ValueError, match="unknown metric"):
        AbConfig("decode", "K", "1", "2", BenchConfig(url=""), metric="latency")  # type: ignore[arg-type]


def test_a_tune_takes_the_same_metrics() -> None:
    knobs = (TuneKnob("decode", "K", ("256", "512")),)
    bench = BenchConfig(url="", concurrencies=(32, 64), slo=SLO)
    assert TuneConfig(knobs, bench).levels == (32, 64)
    assert TuneConfig(knobs, bench, AbMetric.GOODPUT).levels == (32, 64)
    capacity = TuneConfig(knobs, bench, AbMetric.CAPACITY)
    assert capacity.levels == (CAPACITY_LEVEL,)
    assert capacity.record(("256",), tune_id=None).slo == "ttft_p90=1000ms"
    with pytest.raises(ValueError, match="a tune on goodput needs an SLO"):
        TuneConfig(knobs, BenchConfig(url="", concurrencies=(32,)), AbMetric.GOODPUT)


def test_a_goodput_of_zero_leaves_its_level_undecided() -> None:
    cfg = _config(AbMetric.GOODPUT)
    result = cfg.result(None)
    visits = tuple(
        ArmVisit(arm, rnd, None, arm, {32: 1.0, 64: 0.0 if arm == "512" else 0.5}, 0)
        for rnd in range(3)
        for arm in ("256", "512")
    )
    done = conclude(AbResult("decode", "K", "256", "512", design=result.design, visits=visits))
    assert [c.concurrency for c in done.comparisons] == [32, 64]
    assert done.comparisons[1].verdict == "inconclusive"  # no ratio with a 0
    until = AbResult("decode", "K", "256", "512",
                     design=AbDesign(until_decided=True, max_rounds=5, concurrencies=(32, 64)),
                     visits=visits)  # fmt: skip
    assert 64 in undecided_levels(until, 3)


def test_the_report_names_the_metric_and_the_capacity_level() -> None:
    cfg = _config(AbMetric.CAPACITY)
    found = {"256": 48.0, "512": 56.0}
    visits = tuple(
        ArmVisit(arm, rnd, rnd, arm, {CAPACITY_LEVEL: found[arm] + rnd * 0.3}, 0)
        for rnd in range(3)
        for arm in ("256", "512")
    )
    done = conclude(replace_visits(cfg.result(None), visits))
    text = ab_markdown(done)
    assert "(capacity under ttft_p90=1000ms)" in headline(done)
    assert "in capacity" in headline(done) and "| capacity |" in text
    assert "K=256 capacity" in text and "Capacity (the largest load meeting the SLO" in text


def replace_visits(result: AbResult, visits: tuple[ArmVisit, ...]) -> AbResult:
    return AbResult(result.service, result.knob, result.baseline, result.candidate,
                    design=result.design, visits=visits)  # fmt: skip


@pytest.mark.timeout(300)
async def test_an_ab_on_capacity_runs_one_search_a_visit(tmp_path: Path) -> None:
    """Through the real router: each visit searches C2..C4 under a generous SLO (so each search
    reaches its ceiling in two probes); the A/B compares one capacity per visit."""
    loaded = load_spec(write_pd_spec(tmp_path, knob="512", time_scale=0.05))
    await deploy.up(loaded)
    try:
        bench = BenchConfig(url="", concurrencies=(2, 4), requests=8, slo=parse_slo("e2e_p50=30s"),
                            input_len=LengthDist("fixed", 16), output_len=LengthDist("fixed", 8),
                            idle_timeout_s=30)  # fmt: skip
        cfg = AbConfig("decode", DEFAULT_KNOB, "256", "512", bench, repeat=2,
                       metric=AbMetric.CAPACITY)  # fmt: skip
        with Ledger.open(tmp_path / "ledger.db") as ledger:
            result = await run_ab(loaded, cfg, ledger=ledger)
            recorded = ledger.get(AbRunRecord, result.ab_id or 0)
    finally:
        await deploy.down(loaded)
    assert [v.throughput for v in result.visits] == [{CAPACITY_LEVEL: 4.0}] * 4
    assert all(len(v.bench_run_ids) == 2 for v in result.visits)  # C2, then C4: the ceiling
    (comparison,) = result.comparisons
    assert comparison.concurrency == CAPACITY_LEVEL and comparison.ratio == pytest.approx(1.0)
    assert result.design.metric == AbMetric.CAPACITY and result.design.slo == "e2e_p50=30000ms"
    assert recorded is not None and recorded.result.design.metric == AbMetric.CAPACITY


def test_a_rate_capacity_ab_stores_its_probe_span() -> None:
    """Issue 38 (Known after the 23rd pass): ``ab --metric capacity`` had no ``--probe-s``; its
    span is stored with the A/B (a resumed one keeps it), left out when not given (as older A/Bs
    stored it), and refused where no rate search runs."""
    bench = BenchConfig(url="", concurrencies=(8,), rate=4.0, slo=SLO)
    cfg = AbConfig("decode", "K", "256", "512", bench, metric=AbMetric.CAPACITY, probe_s=3.0)
    assert cfg.span_s == 3.0 and encode(cfg)["probe_s"] == 3.0
    assert decode(AbConfig, encode(cfg)) == cfg
    plain = AbConfig("decode", "K", "256", "512", bench, metric=AbMetric.CAPACITY)
    assert "probe_s" not in encode(plain) and plain.span_s == 10.0
    assert decode(AbConfig, encode(plain)) == plain
    for metric, rated, span in ((AbMetric.CAPACITY, None, 3.0), (AbMetric.GOODPUT, 4.0, 3.0),
                                (AbMetric.CAPACITY, 4.0, 0.0)):  # fmt: skip
        with pytest.raises(ValueError, match="probe span"):
            AbConfig("decode", "K", "1", "2", replace(bench, rate=rated), metric=metric,
                     probe_s=span)  # fmt: skip


def test_a_rate_capacity_tune_stores_its_probe_span() -> None:
    """``tune --metric capacity`` takes ``--probe-s`` as ``ab`` does: stored, omitted when not
    given (older tunes read), refused where no rate search runs."""
    bench = BenchConfig(url="", concurrencies=(8,), rate=4.0, slo=SLO)
    knobs = (TuneKnob("decode", "K", ("1", "2")),)
    cfg = TuneConfig(knobs, bench, AbMetric.CAPACITY, probe_s=3.0)
    assert cfg.span_s == 3.0 and encode(cfg)["probe_s"] == 3.0
    assert decode(TuneConfig, encode(cfg)) == cfg
    plain = TuneConfig(knobs, bench, AbMetric.CAPACITY)
    assert "probe_s" not in encode(plain) and plain.span_s == 10.0
    for metric, rated, span in ((AbMetric.CAPACITY, None, 3.0), (AbMetric.GOODPUT, 4.0, 3.0),
                                (AbMetric.CAPACITY, 4.0, 0.0)):  # fmt: skip
        with pytest.raises(ValueError, match="probe span"):
            TuneConfig(knobs, replace(bench, rate=rated), metric, probe_s=span)


@pytest.mark.timeout(300)
async def test_an_ab_on_capacity_by_rate_probes_for_its_span(tmp_path: Path) -> None:
    """Through the real router: each visit's rate search sends each probe ``probe_s`` seconds of
    arrivals (1 s here; the default would send ten times as many)."""
    loaded = load_spec(write_pd_spec(tmp_path, knob="512", time_scale=0.05))
    await deploy.up(loaded)
    try:
        bench = BenchConfig(url="", concurrencies=(1,), rate=4.0, requests=2,
                            slo=parse_slo("e2e_p50=30s"), input_len=LengthDist("fixed", 16),
                            output_len=LengthDist("fixed", 8), idle_timeout_s=30)  # fmt: skip
        cfg = AbConfig("decode", DEFAULT_KNOB, "256", "512", bench, repeat=1,
                       metric=AbMetric.CAPACITY, probe_s=1.0)  # fmt: skip
        with Ledger.open(tmp_path / "ledger.db") as ledger:
            result = await run_ab(loaded, cfg, ledger=ledger)
            rows = [ledger.get(BenchRunRecord, i) for v in result.visits for i in v.bench_run_ids]
    finally:
        await deploy.down(loaded)
    assert len(result.visits) == 2 and all(v.bench_run_ids for v in result.visits)
    sent = [(row.config["rate"], row.config["requests"]) for row in rows if row is not None]
    assert len(sent) == len(rows) and len(sent) >= 2, sent
    assert all(n == max(2, math.ceil(rate)) for rate, n in sent), sent
