"""Seeded workloads: determinism with seed 0, lengths, shared prefixes, Poisson offsets."""

from __future__ import annotations

import pytest

from servelab.core.load.records import RequestRecord
from servelab.core.load.workload import (
    LengthDist,
    closed_loop_ramp_ns,
    generate_requests,
    poisson_offsets_ns,
)

FIXED = LengthDist("fixed", 16)


def test_seed_zero_is_deterministic_and_differs_from_seed_one() -> None:
    a = generate_requests(5, input_len=FIXED, output_len=FIXED, seed=0)
    b = generate_requests(5, input_len=FIXED, output_len=FIXED, seed=0)
    c = generate_requests(5, input_len=FIXED, output_len=FIXED, seed=1)
    assert a == b
    assert a != c
    assert all(len(r.prompt.split()) == 16 == r.input_len for r in a)


def test_distributions_stay_in_range() -> None:
    uniform = LengthDist("uniform", 100, 20)
    normal = LengthDist("normal", 50, 10)
    reqs = generate_requests(200, input_len=uniform, output_len=normal, seed=0)
    assert all(80 <= r.input_len <= 120 for r in reqs)
    assert len({r.output_len for r in reqs}) > 5
    with pytest.raises(ValueError):
        LengthDist("zipf", 10)


def test_shared_prefix() -> None:
    reqs = generate_requests(
        4, input_len=FIXED, output_len=FIXED, seed=0, shared_prefix_len=8, n_prefixes=2
    )
    heads = [" ".join(r.prompt.split()[:8]) for r in reqs]
    assert heads[0] == heads[2] != heads[1] == heads[3]
    assert all(r.input_len == 16 for r in reqs)


def test_poisson_offsets_are_seeded_sorted_and_near_the_rate() -> None:
    offsets = poisson_offsets_ns(2000, 100.0, seed=0)
    assert offsets == poisson_offsets_ns(2000, 100.0, seed=0)
    assert offsets[0] == 0
    assert offsets == sorted(offsets)
    assert offsets[-1] / 1e9 == pytest.approx(20.0, rel=0.1)
    with pytest.raises(ValueError):
        poisson_offsets_ns(3, 0.0, seed=0)


def test_the_closed_loop_ramp_is_given_or_the_warm_up_median_e2e() -> None:
    def done(e2e_ms: int, error: str | None = None) -> RequestRecord:
        record = RequestRecord(0, scheduled_ns=0, sent_ns=0, end_ns=e2e_ms * 1_000_000)
        if error is not None:
            record.fail(error, "")
        return record

    assert closed_loop_ramp_ns(0.04, [done(900)]) == 40_000_000
    assert closed_loop_ramp_ns(None, []) == 0
    warm = [done(30), done(10), done(20), done(500, "http 500")]  # the failed one is left out
    assert closed_loop_ramp_ns(None, warm) == 20_000_000
    assert closed_loop_ramp_ns(None, [done(10), done(30)]) == 30_000_000  # the upper median
