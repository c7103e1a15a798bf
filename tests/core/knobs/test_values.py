"""A knob's value checked before it is written (``core/knobs/values.py``), and the typed
arguments it knows checked against the simulator's parser (which mirrors the engines')."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from servelab.core.engines import SGLANG, VLLM
from servelab.core.knob import parse_knob
from servelab.core.knobs.values import ARGUMENT_TYPES, check_value
from servelab.errors import KnobError
from servelab.sim.engineargs import SglangArgs, VllmArgs


def _check(name: str, value: str | None, engine: object = SGLANG) -> str | None:
    return check_value(parse_knob(name, engine), value, engine)  # type: ignore[arg-type]


def test_values_the_engine_reads_back_are_kept_as_the_knob_stores_them() -> None:
    assert _check("--disable-overlap-schedule", "true") == "on"
    assert _check("--disable-overlap-schedule", "OFF") == "off"
    assert _check("--max-running-requests", "64") == "64"
    assert _check("--chunked-prefill-size", "-1") == "-1"  # a negative number, not an option
    assert _check("--gpu-memory-utilization", "1", VLLM) == "1"
    assert _check("--mem-fraction-static", "1e-1") == "1e-1"
    assert _check("--mem-fraction-static", "0.85") == "0.85"
    assert _check("--schedule-policy", "lpm") == "lpm"  # untyped here: as written
    assert _check("SGLANG_X", "a b *") == "a b *"  # an env value is taken as written
    assert _check("--max_num_seqs", "8", VLLM) == "8"
    assert _check("--max-running-requests", "9223372036854775807") == "9223372036854775807"
    assert _check("--max-running-requests", None) is None


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("--max-running-requests", "-1", "at least 1"),
        ("--max-running-requests", "0", "at least 1"),
        ("--chunked-prefill-size", "-2", "at least -1"),
        ("--mem-fraction-static", "0", "above 0 and at most 1"),
        ("--mem-fraction-static", "1.5", "above 0 and at most 1"),
        ("--max-running-requests", "6_4", "takes a whole number"),
        ("--max-running-requests", "+64", "takes a whole number"),
        ("--max-running-requests", "99999999999999999999", "64 bits"),
        ("--chunked-prefill-size", "-9223372036854775809", "64 bits"),
        ("--max-total-tokens", "9223372036854775808", "64 bits"),
    ],
)
def test_values_out_of_range_or_spelled_otherwise_are_refused(
    name: str, value: str, message: str
) -> None:
    """Issue 38's later pass, a low: a negative ``--max-running-requests`` was written; ``6_4``
    is read as 64 by ``int`` (two arms of one setting)."""
    with pytest.raises(KnobError, match=message):
        _check(name, value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("--max-running-requests", "\uff16\uff14"),  # full-width 64
        ("--max-running-requests", "6\u0664"),  # an Arabic-Indic 4
        ("SGLANG_SM120_MMA_TARGET_CTAS", "\uff15\uff11\uff12"),
        ("--mem-fraction-static", "0.\uff18"),
    ],
)
def test_non_ascii_digits_are_refused_for_every_kind_of_knob(name: str, value: str) -> None:
    """M6 (issue 38's later pass): ``tune --knob decode:--max-running-requests=６４,64`` ran two
    arms of one setting (the engine's ``int`` reads ``６４`` as 64)."""
    with pytest.raises(KnobError, match="not ASCII 0-9"):
        _check(name, value)


def test_a_value_that_was_not_utf8_is_refused() -> None:
    # `knob set decode NAME=$'\xff\xfe'` ended in "unexpected UnicodeEncodeError" (a third pass)
    with pytest.raises(KnobError, match="not UTF-8"):
        _check("SGLANG_SM120_MMA_TARGET_CTAS", "\udcff\udcfe")


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


@pytest.mark.parametrize("name", ["SGLANG_X", "--max-running-requests", "--json-arg.key"])
def test_a_value_over_4_kib_is_refused_for_every_kind_of_knob(name: str) -> None:
    """Issue 38, eighth hostile pass: ``tune --knob decode:X=<5,000 characters>`` was accepted
    (written, restarted and stored); a value is at most 4 KiB, in UTF-8 bytes."""
    with pytest.raises(KnobError, match="a value of 4,097 bytes: at most 4,096"):
        _check(name, "7" * 4097)
    with pytest.raises(KnobError, match="a value of 4,098 bytes"):
        _check(name, "é" * 2049)
    if name == "SGLANG_X":
        assert _check(name, "7" * 4096) == "7" * 4096
