"""Every real-number option refuses ``nan`` and ``inf`` as a usage error (exit 2), naming it.

click's own ``float`` and ``FloatRange`` let ``nan`` through every bound: ``soak --long-share nan``
ended in "unexpected ValueError", ``soak --think-time nan`` ran a soak that never started a round
and called it OK. ``cli/numbers.Finite`` is the one type; the architecture check below keeps it so.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from servelab.cli.numbers import Finite, Whole
from tests.support import run_cli

CLI = Path(__file__).resolve().parents[2] / "src" / "servelab" / "cli"


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("soak", "--long-share", "nan"), "--long-share"),
        (("soak", "--think-time", "inf"), "--think-time"),
        (("soak", "--duration", "NaN"), "--duration"),
        (("investigate", "--duration", "nan", "--yes"), "--duration"),
    ],
)
def test_nan_and_inf_are_usage_errors_naming_the_option(
    args: tuple[str, ...], option: str, tmp_path: Path
) -> None:
    done = run_cli(*args, "--ledger", str(tmp_path / "l.db"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"Invalid value for '{option}'" in done.stderr and "finite" in done.stderr
    assert "Traceback" not in done.stderr and "unexpected" not in done.stderr
    assert not (tmp_path / "l.db").exists()  # refused before anything was opened


@pytest.mark.parametrize("text", ["nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e400"])
def test_finite_refuses_what_is_not_a_finite_number(text: str) -> None:
    with pytest.raises(click.BadParameter):
        Finite().convert(text, None, None)


@pytest.mark.parametrize(("text", "value"), [("0", 0.0), ("-0", -0.0), ("1e308", 1e308)])
def test_finite_keeps_every_finite_number_and_its_bounds(text: str, value: float) -> None:
    assert Finite().convert(text, None, None) == value
    with pytest.raises(click.BadParameter):
        Finite(0, 1).convert("1.5", None, None)


@pytest.mark.parametrize(
    "declared",
    [
        r"FloatRange\(|type=float\b|click\.FLOAT\b",  # they let ``nan`` through
        r"IntRange\(|type=int\b|click\.INT\b",  # they read any script's digits
    ],
    ids=["finite", "whole"],
)
def test_every_number_option_is_finite_or_whole(declared: str) -> None:
    """No command declares click's own number types: ``cli/numbers`` has the one of each."""
    found = [
        f"{path.name}:{n}"
        for path in sorted(CLI.glob("*.py"))
        if path.name != "numbers.py"
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if re.search(declared, line)
    ]
    assert not found, found


def test_a_bounded_finite_says_finite_first_then_the_bound() -> None:
    """``inf`` past a maximum is said not finite (not "out of range"); 1e308 is out of range."""
    with pytest.raises(click.BadParameter, match="not a finite number"):
        Finite(0, 86400).convert("inf", None, None)
    with pytest.raises(click.BadParameter, match=r"1e\+308 is not in the range"):
        Finite(0, 86400).convert("1e308", None, None)
    assert Finite(0, 86400).convert("86400", None, None) == 86400.0


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("case", "show", "\u0663"), "CASE_ID"),  # Arabic-Indic three
        (("soak", "--rounds", "\u0c67"), "--rounds"),  # Telugu one
        (("tune", "--gpus", "\uff12", "--knob", "decode:x=1,2"), "--gpus"),  # fullwidth two
    ],
)
def test_whole_numbers_in_other_scripts_are_usage_errors_naming_the_option(
    args: tuple[str, ...], option: str, tmp_path: Path
) -> None:
    """click's ``int`` read any script's digits: ``case show ٣`` showed case 3, ``soak --rounds
    ౧`` ran a round. ``cli/numbers.Whole`` takes ASCII digits only (left from the seventeenth
    pass)."""
    done = run_cli(*args, "--ledger", str(tmp_path / "l.db"), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Invalid value for" in done.stderr and option in done.stderr, done.stderr
    assert "ASCII digits" in done.stderr, done.stderr
    assert not (tmp_path / "l.db").exists()


def test_whole_keeps_ascii_numbers_and_its_bounds() -> None:
    assert Whole().convert("-7", None, None) == -7 and Whole(1).convert("12", None, None) == 12
    for text in ("\u0663", "1\u00b2", "\uff11", "1_000"):
        with pytest.raises(click.BadParameter, match="plain ASCII digits"):
            Whole().convert(text, None, None)
    with pytest.raises(click.BadParameter, match="plain ASCII digits"):
        Finite().convert("1_0.5", None, None)  # float reads digit groups too
    with pytest.raises(click.BadParameter):
        Whole(1, 50).convert("51", None, None)
