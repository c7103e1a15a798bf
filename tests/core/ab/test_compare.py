"""A/B verdicts and anomalies on hand-made throughput samples."""

from __future__ import annotations

import pytest

from servelab.core.ab.compare import Verdict, compare_arms, curve_drops, find_anomalies
from servelab.core.ledger.codec import encode

BETTER, WORSE = Verdict.BETTER, Verdict.WORSE
NO_DIFFERENCE, INCONCLUSIVE = Verdict.NO_DIFFERENCE, Verdict.INCONCLUSIVE


def _cmp(base: list[float], cand: list[float]) -> str:
    (c,) = compare_arms({64: base}, {64: cand}, baseline_label="256", candidate_label="512")
    return c.verdict


def test_clear_win_is_better() -> None:
    assert _cmp([1000, 1010, 995], [1128, 1135, 1120]) == BETTER


def test_clear_loss_is_worse() -> None:
    assert _cmp([1128, 1135, 1120], [1000, 1010, 995]) == WORSE


def test_overlap_is_no_significant_difference() -> None:
    assert _cmp([1000, 1040, 970], [1012, 980, 1030]) == NO_DIFFERENCE


def test_one_repeat_is_inconclusive_never_significant() -> None:
    (c,) = compare_arms({64: [1000.0]}, {64: [1200.0]}, baseline_label="a", candidate_label="b")
    assert c.verdict == INCONCLUSIVE
    assert c.reason
    assert c.ratio == pytest.approx(1.2)


def test_ratio_and_interval_bracket_the_change() -> None:
    (c,) = compare_arms(
        {64: [1000, 1010, 990]}, {64: [1128, 1138, 1118]}, baseline_label="a", candidate_label="b"
    )
    assert c.ratio == pytest.approx(1.128, abs=1e-3)
    assert c.ci[0] < c.ratio < c.ci[1]
    assert c.change == pytest.approx(0.128, abs=1e-3)
    assert encode(c)["ci"] == list(c.ci)


def test_only_common_concurrencies_in_order() -> None:
    out = compare_arms(
        {96: [1, 1.1], 64: [1, 1.1], 80: [1, 1.1]},
        {64: [1, 1.1], 96: [1, 1.1]},
        baseline_label="a",
        candidate_label="b",
    )
    assert [c.concurrency for c in out] == [64, 96]


def test_non_monotonic_throughput_is_an_anomaly() -> None:
    (a,) = find_anomalies("256", {64: [900.0], 80: [1000.0, 1010.0], 96: [970.0, 980.0]})
    assert (a.arm, a.concurrency, a.previous) == ("256", 96, 80)
    assert a.drop == pytest.approx(1 - 975 / 1005)
    assert find_anomalies("512", {64: [900.0], 80: [1000.0], 96: [1010.0]}) == []


def test_noise_is_not_an_anomaly_but_a_significant_drop_is() -> None:
    noisy = {80: [1000.0, 1040.0, 970.0], 96: [990.0, 1030.0, 985.0]}
    assert find_anomalies("512", noisy) == []
    (drop,) = curve_drops("512", noisy)
    assert not drop.significant and drop.p_value > 0.05
    clear = {80: [1891.0, 1885.0, 1897.0], 96: [1837.0, 1840.0, 1831.0]}
    (a,) = find_anomalies("256", clear)
    assert a.significant and a.p_value < 0.05
    assert a.test.startswith("Welch")
    assert a.drop_ci[0] < a.drop < a.drop_ci[1]
    assert a.drop_ci[0] > 0  # the whole 90% interval of the drop is above 0
    assert encode(a)["drop_ci"] == list(a.drop_ci)


def test_paired_unpaired_and_sequential_side_by_side() -> None:
    drift = [1000.0, 1100.0, 1200.0, 1300.0]
    cand = [v * f for v, f in zip(drift, (1.021, 1.019, 1.022, 1.018), strict=True)]
    (c,) = compare_arms({64: drift}, {64: cand}, baseline_label="a", candidate_label="b")
    assert c.verdict == BETTER and c.method.startswith("paired t interval")
    assert c.rounds == 4
    assert c.unpaired is not None and c.unpaired.verdict == "not significant"
    assert c.sequential is not None and c.sequential.n == 4
    doc = encode(c)
    assert doc["paired"]["n"] == 4 and "unpaired" in doc and "sequential" in doc
    assert doc["decision"] in {"better", "undecided"}
