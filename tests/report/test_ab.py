"""The A/B report on a hand-made result: visits in order, the three analyses, cost, anomalies."""

from __future__ import annotations

from dataclasses import replace

from servelab.core.ab.design import (
    Noise,
    rounds_for_equivalence,
    rounds_for_power,
    sequential_rounds_for_power,
)
from servelab.core.ab.result import AbResult, ArmVisit, conclude
from servelab.core.bench.contract import BenchConfig
from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.load.workload import LengthDist
from servelab.ops.ab.config import AbConfig
from servelab.ops.ab.plan import AbPlan
from servelab.report.ab import ab_markdown, plan_markdown


def _result(boundary: str = "pocock") -> AbResult:
    bench = BenchConfig(url="", concurrencies=(80, 96), input_len=LengthDist("fixed", 8))
    cfg = AbConfig("decode", DEFAULT_KNOB, "256", "512", bench, repeat=3, gpus=8)
    cfg = replace(cfg, until_decided=True, max_rounds=6, margin=0.03, boundary=boundary)
    visits = []
    orders = ["256→512", "512→256", "256→512"]
    for rnd, e in enumerate((1.0, 1.003, 0.998)):
        pair = [("256", {80: 1891.0 * e, 96: 1837.0 * e}), ("512", {80: 1912.0 * e, 96: 1990 * e})]
        for pos, (arm, thr) in enumerate(pair if rnd % 2 == 0 else pair[::-1]):
            visits.append(ArmVisit(arm, rnd, 10 + rnd, arm, thr, 0, (), 2 * rnd + pos, orders[rnd],
                                   30.0, {80: 20.0, 96: 20.0}))  # fmt: skip
    return conclude(replace(cfg.result("512"), visits=tuple(visits)))


def with_servers(result: AbResult, baseline: float, candidate: float) -> AbResult:
    """``result`` with the decodes' counters at C80 giving ``baseline`` and ``candidate``."""
    visits = tuple(
        replace(v, server_throughput={80: baseline if v.arm == "256" else candidate})
        for v in result.visits
    )
    return replace(result, visits=visits)


def test_the_report_shows_order_pairing_stopping_and_the_tested_anomaly() -> None:
    text = ab_markdown(_result())
    assert "Visits in the order they ran (ABBA" in text
    assert "| 2 | 1 | 256→512 | SGLANG_SM120_MMA_TARGET_CTAS=512 | 10 |" in text
    assert "| 3 | 2 | 512→256 | SGLANG_SM120_MMA_TARGET_CTAS=512 | 11 |" in text
    assert "paired t interval on the mean log ratio (n=3 rounds, df=2)" in text
    assert "What pairing bought" in text and "Fieller" in text
    assert "Pocock repeated confidence intervals" in text and "equivalence margin ±3%" in text
    assert "looks at rounds 3..6" in text
    assert "Lai (1976) confidence sequence" in ab_markdown(_result("lai"))
    assert "GPU-min at 8 GPU" in text and "the fixed design of 6 rounds" in text
    assert "- anomaly: with SGLANG_SM120_MMA_TARGET_CTAS=256, throughput at C96" in text
    assert "Welch one-sided p=" in text


def test_the_plan_names_its_noise_and_both_designs() -> None:
    noise = (Noise(64, 0.01, 6, 4), Noise(96, float("nan"), 0, 0))
    plan = AbPlan(
        "decode", DEFAULT_KNOB, 0.05, 0.8, 0.05, None, 8, (1, 2), noise,
        tuple(rounds_for_power(n, effect=0.05) for n in noise),
        tuple(sequential_rounds_for_power(n, effect=0.05, max_rounds=8, sims=200) for n in noise),
    )  # fmt: skip
    text = plan_markdown(plan)
    assert "Noise from 2 recorded A/B(s) of decode" in text
    assert "| 64 | 4 (6) | 1.00% | 3 (" in text
    assert "| 96 | 0 | no recorded noise | — | — |" in text
    assert "| 1.41% (√2 bound) |" in text
    assert "Fixed design rounds to call" not in text  # no margin: no equivalence plan


def test_the_plan_with_a_margin_gives_one_fixed_design_for_both_verdicts() -> None:
    noise = (Noise(64, 0.01, 6, 4), Noise(80, 0.01, 6, 4))
    plan = AbPlan(
        "decode", DEFAULT_KNOB, 0.05, 0.8, 0.05, 0.03, 8, (1,), noise,
        tuple(rounds_for_power(n, effect=0.05) for n in noise),
        tuple(sequential_rounds_for_power(n, effect=0.05, max_rounds=8, sims=200) for n in noise),
        tuple(rounds_for_equivalence(n, margin=0.03) for n in noise),
    )  # fmt: skip
    detect = max(p.rounds or 0 for p in plan.fixed)
    equiv = max(p.rounds or 0 for p in plan.equivalence)
    assert plan.fixed_rounds == max(detect, equiv) and equiv > detect
    text = plan_markdown(plan)
    assert (
        f"within ±3% (95% t interval inside the margin, TOST) with power 0.8: C64 {equiv}" in text
    )
    assert f"either verdict at every concurrency: {plan.fixed_rounds} rounds" in text


def test_the_servers_view_of_each_arm_sits_next_to_the_clients() -> None:
    result = _result()
    assert "What the decodes counted" not in ab_markdown(result)  # no telemetry: no claim
    for v in result.visits:
        v.server_throughput[80] = 1000.0 if v.arm == "256" else 1100.0
    text = ab_markdown(result)
    assert "What the decodes counted" in text
    assert "| 80 | +10.0% | +1.1% | 1000.0 | 1100.0 |" in text
    assert "| 96 |" not in text.split("What the decodes counted")[1].split("What pairing")[0]
