"""The one parser of a typed whole number: options, bounds and ab's rounds say the same."""

from __future__ import annotations

import pytest

from servelab.core.ab.rounds import parse_ab_rounds
from servelab.core.bounds import parse_repeat
from servelab.core.options import parse_concurrency, parse_requests
from servelab.core.whole import echoed, parse_whole
from servelab.errors import OptionError


def test_a_whole_number_in_bounds_or_one_line_saying_what_was_expected() -> None:
    assert parse_whole("7", "a whole number") == 7
    assert parse_whole("-3", "a whole number") == -3
    with pytest.raises(OptionError, match=r"^expected a whole number ≥ 1, got '0'$"):
        parse_whole("0", "a whole number ≥ 1", low=1)
    with pytest.raises(OptionError, match=r"^expected a whole number from 1 to 9, got '1.5'$"):
        parse_whole("1.5", "a whole number from 1 to 9", 1, 9)
    assert echoed("9" * 400) == "'999999999999999999999999'… (400 characters)"


@pytest.mark.parametrize(
    ("parse", "text", "said"),
    [
        (parse_repeat, "0", "expected a whole number from 1 to 1,000, got '0'"),
        (parse_ab_rounds, "1", "expected a whole number from 2 to 50, got '1'"),
        (parse_requests, "x", "expected a whole number from 1 to "),
        (parse_ab_rounds, "9" * 30, "got '999999999999999999999999'… (30 characters)"),
        (parse_repeat, "9" * 30, "got '999999999999999999999999'… (30 characters)"),
    ],
)
def test_every_count_option_says_it_in_one_shape(parse: object, text: str, said: str) -> None:
    with pytest.raises(OptionError) as caught:
        parse(text)  # type: ignore[operator]
    assert said in str(caught.value)


@pytest.mark.parametrize(
    ("text", "repeated"), [("4,4", "4"), ("4,8,04", "4"), ("1,2,1,2", "1, 2")]
)  # fmt: skip
def test_a_level_given_twice_is_refused_naming_it(text: str, repeated: str) -> None:
    """The thirteenth pass: ``--concurrency 4,4`` ran level 4 twice as if two levels."""
    with pytest.raises(OptionError, match=f"gives {repeated} more than once"):
        parse_concurrency(text)
    assert parse_concurrency("4,8") == (4, 8)


def test_digits_of_another_script_and_a_lost_level_are_refused() -> None:
    """Issue 38, fifteenth pass (low): a full-width ``１`` was taken as 1 (``int`` reads any
    script's digits) and ``--concurrency 1,,2`` as ``1,2`` (an empty level skipped)."""
    for text in ("\uff11", "\u0663", "1\uff10", "\U0001d7d9"):
        with pytest.raises(OptionError, match="expected a whole number"):
            parse_requests(text)
    for text in ("1,,2", ",4", "4,8,,", "1, ,2", "\uff11", "4,\uff18"):
        with pytest.raises(OptionError, match="concurrency must be positive integers"):
            parse_concurrency(text)
    assert parse_concurrency("4, 8,") == (4, 8) and parse_concurrency(" 4 ") == (4,)
