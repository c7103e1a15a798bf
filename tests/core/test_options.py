"""Command-line option texts parsed by pure rules (the CLI turns their ValueError into exit 2)."""

from __future__ import annotations

import pytest

from servelab.core.load.workload import LengthDist
from servelab.core.options import KnobArms, parse_concurrency, parse_knob_arms, parse_length


def test_concurrency_lists() -> None:
    assert parse_concurrency("64,80,96") == (64, 80, 96)
    assert parse_concurrency("4, 8,") == (4, 8)
    for bad in ("0,4", "", ","):
        with pytest.raises(ValueError, match="concurrency must be positive"):
            parse_concurrency(bad)
    with pytest.raises(ValueError):
        parse_concurrency("0,x")


def test_length_distributions() -> None:
    assert parse_length("64") == LengthDist("fixed", 64)
    assert parse_length("uniform:128:32") == LengthDist("uniform", 128.0, 32.0)
    assert parse_length("normal:128:16").kind == "normal"
    with pytest.raises(ValueError, match="length must be N"):
        parse_length("uniform:128")
    with pytest.raises(ValueError, match="unknown length distribution"):
        parse_length("zipf:1:2")


def test_knob_arms() -> None:
    assert parse_knob_arms("decode:K=256, 512") == KnobArms("decode", "K", "256", "512")
    assert parse_knob_arms("decode:K=a=b,c").baseline == "a=b"
    for bad in ("decode-256,512", "decode:K=256", ":K=1,2", "decode:K=1,", "decode:K=1,2,3"):
        with pytest.raises(ValueError, match="expected SERVICE:NAME=BASELINE,CANDIDATE"):
            parse_knob_arms(bad)
