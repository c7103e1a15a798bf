"""The cold/warm rule: the decodes' own counters of finished requests first, else two probes'
timings."""

from __future__ import annotations

import pytest

from servelab.core.verify.coldstart import (
    COLD_MIN_S,
    COLD_RATIO,
    Start,
    StartClass,
    StartReason,
    classify_start,
    decode_counts,
    needs_second_probe,
)

SGLANG = (
    "# TYPE sglang:num_requests_total counter\n"
    'sglang:num_requests_total{model_name="m",engine_type="decode"} 7.0\n'
)
VLLM = (
    'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 2.0\n'
    'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 1.0\n'
)
#: SGLang with --enable-metrics before its first request finished: gauges, no counter series yet
SGLANG_FRESH = 'sglang:num_running_reqs{model_name="m",engine_type="decode",tp_rank="0"} 0.0\n'


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


def test_decode_counts_read_the_engines_own_counters() -> None:
    assert decode_counts([SGLANG, VLLM]) == (7, 3)  # vLLM: every finished_reason
    assert decode_counts([SGLANG_FRESH]) == (0,)  # the series appears once a request finished
    assert decode_counts([SGLANG, None]) is None  # one /metrics did not answer (SGLang: 404)
    assert decode_counts(["process_cpu_seconds_total 1\n"]) is None  # no engine series
    assert decode_counts(["not { an exposition"]) is None
    assert decode_counts([]) is None
