"""The A/B cross-check (pure): the client's ratio against the servers' own, flagged beyond the
stated tolerance with both values."""

from __future__ import annotations

import pytest

import servelab.core.ab.crosscheck as crosscheck_mod
from servelab.core.ab.crosscheck import (
    RATIO_TOLERANCE,
    ServerDisagreement,
    disagreements,
    server_ratios,
)
from servelab.core.ledger.codec import encode


def test_public_api_is_explicit() -> None:
    for name in crosscheck_mod.__all__:
        assert hasattr(crosscheck_mod, name), name


def test_server_ratios_are_means_of_each_arm_where_both_have_values() -> None:
    got = server_ratios({64: [1000.0, 1020.0], 96: [900.0], 80: [0.0]},
                        {64: [1100.0, 1122.0], 80: [5.0]})  # fmt: skip
    assert got == {64: pytest.approx(1.1)}  # 96: no candidate; 80: a zero baseline


def test_a_client_effect_the_servers_do_not_see_is_flagged_with_both_values() -> None:
    # The reference incident's shape: +12.8% at the client, +1% from the decodes' counters.
    flags = disagreements({64: 1.128, 80: 1.012, 96: 1.057}, {64: 1.01, 80: 1.015})
    assert flags == [ServerDisagreement(64, 1.128, 1.01, RATIO_TOLERANCE)]
    (flag,) = flags
    assert flag.difference == pytest.approx(1.128 / 1.01 - 1)
    doc = encode(flag)
    assert doc["server_ratio"] == 1.01 and doc["tolerance"] == 0.05
    assert doc["difference"] == pytest.approx(flag.difference)


def test_ratios_within_the_tolerance_and_levels_without_a_server_ratio_are_not_flagged() -> None:
    assert disagreements({64: 1.06}, {64: 1.02}) == []  # 3.9% <= 5%
    assert disagreements({64: 1.5}, {}) == []  # unknown: not judged
    assert disagreements({64: 1.06}, {64: 1.02}, tolerance=0.01)[0].concurrency == 64
