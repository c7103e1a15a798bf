"""A knob's value checked before it is written (``core/knobs/values.py``), and the typed
arguments it knows checked against the simulator's parser (which mirrors the engines')."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from servelab.core.deploy.engines import SGLANG, VLLM
from servelab.core.knobs.knob import parse_knob
from servelab.core.knobs.values import ARGUMENT_TYPES, check_value
from servelab.errors import KnobError
from servelab.sim.engineargs import SglangArgs, VllmArgs


def _check(name: str, value: str | None, engine: object = SGLANG) -> str | None:
    return check_value(parse_knob(name, engine), value, engine)  # type: ignore[arg-type]


def test_values_the_engine_reads_back_are_kept_as_the_knob_stores_them() -> None:
    assert _check("--disable-overlap-schedule", "true") == "on"
    assert _check("--disable-overlap-schedule", "OFF") == "off"
    assert _check("--max-running-requests", "64") == "64"
    assert _check("--max-running-requests", "-1") == "-1"
    assert _check("--mem-fraction-static", "0.85") == "0.85"
    assert _check("--schedule-policy", "lpm") == "lpm"  # untyped here: as written
    assert _check("SGLANG_X", "a b *") == "a b *"  # an env value is taken as written
    assert _check("--max_num_seqs", "8", VLLM) == "8"
    assert _check("--max-running-requests", None) is None


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("--max-running-requests", "--disable-radix-cache", "is an option, not a value"),
        ("--max-running-requests", "-x", "is an option"),
        ("--max-running-requests", "", "needs a value"),
        ("--max-running-requests", "  ", "needs a value"),
        ("--chunked-prefill-size", "*", "takes a whole number"),
        ("--max-running-requests", "1.5", "takes a whole number"),
        ("--mem-fraction-static", "nan", "takes a finite number"),
        ("--max-running-requests", "4 --x", "holds white space"),
        ("--disable-overlap-schedule", "maybe", "on or off"),
        ("SGLANG_X", "a\nb", "newline"),
    ],
)
def test_values_the_engine_would_not_read_back_are_refused(
    name: str, value: str, message: str
) -> None:
    """Defects 14 and 15 (issue 38)."""
    with pytest.raises(KnobError, match=message):
        _check(name, value)


@pytest.mark.parametrize(("engine", "cls"), [(SGLANG, SglangArgs), (VLLM, VllmArgs)])
def test_the_typed_arguments_agree_with_the_simulators_parser(engine: object, cls: type) -> None:
    """Every typed argument the simulator models (after the engines' parsers) has that type
    here too."""
    hints = typing.get_type_hints(cls)
    table = ARGUMENT_TYPES[engine.name]  # type: ignore[attr-defined]
    for f in dataclasses.fields(cls):
        kinds = {t for t in typing.get_args(hints[f.name]) or (hints[f.name],)} - {type(None)}
        flag = "--" + f.name.replace("_", "-")
        if flag in table:
            assert kinds == {table[flag]}, flag
        elif kinds <= {int, float} and f.name not in ("port", "disaggregation_bootstrap_port"):
            pytest.fail(f"{flag} is a number in the simulator's parser, untyped here")
