"""The pair layer's fields and rules (core/verify/pair.py) against their contract fixture
(pair.toml, read from the engines' source), and the rules' edges."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from servelab.core.verify.pair import FIELDS, FieldRule, FieldVerdict, PairValue, compare_field

HERE = Path(__file__).parent


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_fields_are_the_fixtures(engine: str) -> None:
    with (HERE / "pair.toml").open("rb") as f:
        fixture = tomllib.load(f)[engine]
    got = [{"name": f.name, "report": list(f.report), "argument": f.argument, "rule": f.rule.value}
           for f in FIELDS[engine]]  # fmt: skip
    assert got == fixture


def _v(value: str | None) -> PairValue:
    return PairValue(True, value, "f")


@pytest.mark.parametrize(
    ("rule", "prefill", "decode", "verdict"),
    [
        (FieldRule.EQUAL, "64", "32", FieldVerdict.MISMATCH),
        (FieldRule.EQUAL, None, None, FieldVerdict.MATCH),
        (FieldRule.DECODE_MULTIPLE, "16", "32", FieldVerdict.MATCH),  # NIXL re-blocks on receipt
        (FieldRule.DECODE_MULTIPLE, "64", "32", FieldVerdict.MISMATCH),  # only nP < nD
        (FieldRule.DECODE_MULTIPLE, "24", "32", FieldVerdict.MISMATCH),
        (FieldRule.DIVIDES, "8", "4", FieldVerdict.MATCH),
        (FieldRule.DIVIDES, "8", "3", FieldVerdict.MISMATCH),
        (FieldRule.EQUAL_OR_MODEL_DEFAULT, None, "4096", FieldVerdict.UNKNOWN),
        (FieldRule.EQUAL_OR_MODEL_DEFAULT, None, None, FieldVerdict.MATCH),
    ],
)
def test_rules(
    rule: FieldRule, prefill: str | None, decode: str | None, verdict: FieldVerdict
) -> None:
    assert compare_field(rule, _v(prefill), _v(decode)) is verdict


def test_a_side_not_reported_is_unknown_never_a_match() -> None:
    for rule in FieldRule:
        assert compare_field(rule, PairValue(False), _v("1")) is FieldVerdict.UNKNOWN
