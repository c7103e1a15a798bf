"""The clock anchor the join maps client times with: the tightest of several bracketed readings,
so a preemption between the two clock reads cannot shift the client-to-worker phases."""

from __future__ import annotations

import time

from servelab.ops.telemetry.tracing import TraceCollector, read_anchor


def _bracket() -> tuple[int, int, int]:
    before = time.perf_counter_ns()
    wall = time.time_ns()
    return before, wall, time.perf_counter_ns()


def test_the_anchor_maps_the_monotonic_clock_onto_the_wall_clock_within_a_bracket() -> None:
    anchor = TraceCollector.anchor()
    # the tightest of a few fresh brackets bounds how far the anchor may be off
    before, wall, after = min((_bracket() for _ in range(7)), key=lambda b: b[2] - b[0])
    assert abs(anchor.to_wall(before) - wall) <= (after - before) + 1_000_000  # 1 ms of drift room
    assert abs(anchor.to_wall(after) - wall) <= (after - before) + 1_000_000


def test_one_reading_is_still_an_anchor() -> None:
    a, b = read_anchor(1), read_anchor(0)  # fewer than one reading reads once
    assert a.mono_ns <= b.mono_ns and a.wall_ns <= b.wall_ns + 1_000_000
