"""The fuzz tier over abbreviated flags: with the parser's flags known, the reader takes a
command line as Python's own argparse (``allow_abbrev``, as both engines parse) does, and an edit
leaves one value for the knob, the one asked for, whatever abbreviations the line held."""

from __future__ import annotations

import argparse
from typing import NoReturn

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from servelab.core.engines import SGLANG
from servelab.core.knob import parse_knob
from servelab.core.knobs.argv import arg_values, knob_value, set_words

NAMES = st.text("ab", min_size=1, max_size=4).map(lambda s: "--x" + s)
FLAG_SETS = st.lists(NAMES, min_size=1, max_size=6, unique=True).map(frozenset)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


def _argparse(flags: frozenset[str], words: list[str]) -> dict[str, str] | None:
    """What argparse takes ``words`` for (None: it refuses them, as an ambiguous prefix)."""
    parser = _Parser(allow_abbrev=True, exit_on_error=False, add_help=False)
    for flag in sorted(flags):
        parser.add_argument(flag, dest=flag)
    try:
        got = vars(parser.parse_args(words))
    except (argparse.ArgumentError, ValueError):
        return None
    return {flag: value for flag, value in got.items() if value is not None}


@st.composite
def lines(draw: st.DrawFn) -> tuple[frozenset[str], list[str]]:
    flags = draw(FLAG_SETS)
    words: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        flag = draw(st.sampled_from(sorted(flags)))
        cut = draw(st.integers(3, len(flag)))
        value = str(draw(st.integers(0, 999)))
        words += [f"{flag[:cut]}={value}"] if draw(st.booleans()) else [flag[:cut], value]
    return flags, words


@given(line=lines())
def test_the_reader_takes_a_line_as_argparse_does(line: tuple[frozenset[str], list[str]]) -> None:
    flags, words = line
    expected = _argparse(flags, words)
    assume(expected is not None)
    assert arg_values(words, SGLANG, flags) == expected


@given(line=lines(), value=st.integers(0, 999), data=st.data())
def test_an_edit_leaves_one_value_the_one_asked(
    line: tuple[frozenset[str], list[str]], value: int, data: st.DataObject
) -> None:
    flags, words = line
    assume(_argparse(flags, words) is not None)
    knob = parse_knob(data.draw(st.sampled_from(sorted(flags))), SGLANG)
    edited = set_words(words, knob, str(value), SGLANG, flags)
    assert knob_value(arg_values(edited, SGLANG, flags), knob, SGLANG) == str(value)
    assert _argparse(flags, edited) == {**(_argparse(flags, words) or {}), knob.arg: str(value)}
    named = [w.split("=")[0] for w in edited if w.startswith("--")]
    assert sum(1 for name in named if arg_values([name, "0"], SGLANG, flags) == {
        knob.arg: "0"}) == 1, edited  # fmt: skip


def test_the_oracle_refuses_an_ambiguous_prefix() -> None:
    assert _argparse(frozenset({"--xa", "--xab"}), ["--xa", "1"]) == {"--xa": "1"}
    assert _argparse(frozenset({"--xaa", "--xab"}), ["--xa", "1"]) is None
    with pytest.raises(AssertionError):
        assert _argparse(frozenset({"--xaa"}), ["--xa", "1"]) is None
