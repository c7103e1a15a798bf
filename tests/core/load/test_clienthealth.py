"""The client-health rule: loop lag, CPU busy, dispatch delay, each against a named threshold."""

from __future__ import annotations

import pytest

from servelab.core.load.clienthealth import (
    CPU_BUSY_LIMIT,
    CPU_BUSY_MIN_WALL_S,
    DISPATCH_LIMIT_MS,
    LAG_LIMIT_MS,
    REASON_CPU_BUSY,
    REASON_DISPATCH_DELAY,
    REASON_LOOP_LAG,
    client_health,
)
from servelab.core.load.records import RequestRecord


def test_client_health_rules() -> None:
    late = RequestRecord(0, scheduled_ns=0, sent_ns=9_000_000, output_tokens=100)
    calm = client_health([late], cpu_s=0.1, wall_s=10.0, lag_s=[0.001] * 50)
    assert calm.reasons == ("dispatch-delay",)
    assert calm.cpu_ms_per_token == pytest.approx(1.0)
    busy = client_health([], cpu_s=9.0, wall_s=10.0, lag_s=[0.001] * 98 + [0.02, 0.03])
    assert busy.reasons == ("loop-lag", "cpu-busy") and busy.client_bound
    short = client_health([], cpu_s=0.5, wall_s=0.5, lag_s=[])
    assert not short.client_bound


def test_each_threshold_is_named_and_strict() -> None:
    assert (LAG_LIMIT_MS, CPU_BUSY_LIMIT, CPU_BUSY_MIN_WALL_S, DISPATCH_LIMIT_MS) == (
        5.0, 0.7, 1.0, 5.0,
    )  # fmt: skip
    at_limit = RequestRecord(0, scheduled_ns=0, sent_ns=int(DISPATCH_LIMIT_MS * 1e6))
    edge = client_health([at_limit], cpu_s=CPU_BUSY_LIMIT, wall_s=1.0,
                         lag_s=[LAG_LIMIT_MS / 1e3] * 10)  # fmt: skip
    assert edge.reasons == () and not edge.client_bound  # at a limit is not above it
    over = RequestRecord(0, scheduled_ns=0, sent_ns=int(DISPATCH_LIMIT_MS * 1e6) + 1_000)
    bound = client_health([over], cpu_s=0.8, wall_s=1.0, lag_s=[0.006] * 10)
    assert bound.reasons == (REASON_LOOP_LAG, REASON_CPU_BUSY, REASON_DISPATCH_DELAY)


def test_cpu_is_judged_on_the_live_streams_time_and_per_token_on_all() -> None:
    record = RequestRecord(0, scheduled_ns=0, sent_ns=1, output_tokens=50)
    health = client_health([record], cpu_s=5.0, wall_s=2.0, lag_s=[], run_cpu_s=0.5)
    assert REASON_CPU_BUSY not in health.reasons  # 0.5 s while live, over 2 s
    assert health.cpu_ms_per_token == pytest.approx(100.0)  # 5 s over 50 tokens
    assert (health.loop_lag_p99_ms, health.loop_lag_max_ms) == (0.0, 0.0)
    assert client_health([], cpu_s=0.0, wall_s=1.0, lag_s=[]).dispatch_p99_ms == 0.0
