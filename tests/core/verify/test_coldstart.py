"""The cold/warm rule: the sim's request counter first, else two probes' timings."""

from __future__ import annotations

import pytest

from servelab.core.verify.coldstart import (
    COLD_MIN_S,
    COLD_RATIO,
    Start,
    StartClass,
    StartReason,
    classify_start,
    needs_second_probe,
    served_count,
)


def test_the_counter_decides_when_there_is_one() -> None:
    assert classify_start([0, 0], 0.1, None) == StartClass(
        Start.COLD, StartReason.FIRST_SINCE_START, 0, 0.1
    )
    warm = classify_start([3, 1], 9.0, None)
    assert (warm.start, warm.reason, warm.served_before) == (
        Start.WARM,
        StartReason.SERVED_BEFORE,
        4,
    )


def test_without_the_counter_two_probes_decide() -> None:
    cold = classify_start(None, 17.9, 1.2)
    assert (cold.start, cold.reason) == (Start.COLD, StartReason.SLOWER_THAN_SECOND)
    assert cold.ratio == pytest.approx(17.9 / 1.2) and cold.served_before is None
    assert classify_start(None, 1.3, 1.2).reason == StartReason.SECOND_PROBE
    assert classify_start(None, 0.3, 0.05).start == Start.WARM  # 6x, but under COLD_MIN_S apart
    assert classify_start(None, 1.0, None) == StartClass(
        Start.UNKNOWN, StartReason.NO_SECOND_PROBE, None, 1.0
    )


def test_the_thresholds_are_named_and_can_be_moved() -> None:
    assert (COLD_RATIO, COLD_MIN_S) == (3.0, 0.5)
    assert classify_start(None, 3.1, 1.0).start == Start.COLD  # 3.1x and 2.1 s slower
    assert classify_start(None, 3.1, 1.0, ratio=3.5).start == Start.WARM
    assert classify_start(None, 3.1, 1.0, ratio=3.0, min_s=2.0).start == Start.COLD
    assert classify_start(None, 3.1, 1.0, ratio=3.0, min_s=2.2).start == Start.WARM
    assert classify_start(None, 0.3, 0.05, min_s=0.1).start == Start.COLD


def test_a_second_probe_is_needed_without_a_counter_or_when_cold() -> None:
    assert needs_second_probe(None) and needs_second_probe([0, 0])
    assert not needs_second_probe([0, 2])


def test_served_count_reads_a_sim_server_info() -> None:
    assert served_count({"servelab": {"warmed_up": False, "requests_total": 7}}) == 0
    assert served_count({"servelab": {"warmed_up": True, "requests_total": 7}}) == 7
    assert served_count({"servelab": {"requests_served": 2}}) == 2
    assert served_count({"servelab": {"requests_served": "2"}}) is None
    assert served_count({"model_path": "x"}) is None
    assert served_count(None) is None and served_count([1]) is None
