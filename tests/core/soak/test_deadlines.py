"""A soak's deadlines: one named set derived from the idle timeout (issue 31, item 3)."""

from __future__ import annotations

import math

from servelab.core.soak.deadlines import CONNECT_CAP_S, PROBE_CAP_S, SCRAPE_CAP_S, Deadlines
from servelab.core.soak.result import SoakConfig


def test_short_idle_timeouts_bound_every_budget() -> None:
    d = Deadlines(idle_s=1.5, duration_s=60.0)
    assert (d.probe_s, d.connect_s, d.scrape_s) == (1.5, 1.5, 1.5)
    assert (d.hold_check_s, d.matrix_s) == (4.5, 12.0)
    assert d.warm_up_s == 15.0  # a quarter of the run beats one idle timeout
    assert d.reserve_s == 4 * 1.5 + 4 * 1.5 + 1.0


def test_long_idle_timeouts_are_capped_where_a_cap_is_named() -> None:
    d = Deadlines(idle_s=30.0, duration_s=300.0)
    assert (d.probe_s, d.connect_s, d.scrape_s) == (PROBE_CAP_S, CONNECT_CAP_S, SCRAPE_CAP_S)
    assert d.warm_up_s == 75.0
    assert d.reserve_s == 4 * 30.0 + 4 * PROBE_CAP_S + 1.0
    short = Deadlines(idle_s=30.0, duration_s=100.0)
    assert short.reserve_s == 50.0  # never more than half the run


def test_without_a_duration_only_the_idle_timeout_bounds() -> None:
    d = Deadlines(idle_s=2.0)
    assert d.matrix_s == 16.0 and d.probe_s == 2.0
    assert math.isinf(d.warm_up_s) and d.reserve_s == 4 * 2.0 + 4 * 2.0 + 1.0


def test_a_soak_config_names_its_deadlines() -> None:
    config = SoakConfig(duration_s=40.0, idle_timeout_s=3.0)
    assert config.deadlines == Deadlines(3.0, 40.0)
