"""Issue 38, seventh pass, H5/H6/M7/M10, through the real CLI: huge finite numbers.

``bench --deadline 1e308`` (``--idle-timeout``, ``--ramp``, ``--rate 1e-308``, ``--input-len
normal:10:1e308``, ``soak --idle-timeout 1e308``) ended in "unexpected OverflowError"; ``ledger
prune --older-than 99999999999d`` in "unexpected ValueError: year -273788674 is out of range";
``soak --max-tokens 99999999999999999999`` was sent to the router; ``ab``/``tune --resume
99999999999999999999`` raised OverflowError in sqlite3. Each is refused: a usage error (exit 2)
naming the option, the number said with ``%g`` (never 300 digits), nothing opened or sent.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from servelab.io.ledger.journal import AbJournal
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tunes import TuneStore
from tests.support import run_cli

HUGE_ID = "99999999999999999999"


@pytest.mark.parametrize(
    ("args", "option", "said"),
    [
        (("bench", "--deadline", "1e308"), "--deadline", "1e+308 s is over the most allowed"),
        (("bench", "--idle-timeout", "1e308"), "--idle-timeout", "86,400 s"),
        (("bench", "--ramp", "1e308"), "--ramp", "86,400 s"),
        (("bench", "--rate", "1e-308"), "--rate", "one a day"),
        (("bench", "--input-len", "normal:10:1e308"), "--input-len", "reaches 1e+308 tokens"),
        (("bench", "--output-len", "9" * 400), "--output-len", "(400 characters)"),
        (("soak", "--idle-timeout", "1e308"), "--idle-timeout", "86,400 s"),
        (("soak", "--think-time", "1e308"), "--think-time", "1e+308"),
        (("soak", "--duration", "1e308"), "--duration", "1e+308"),
        (("soak", "--max-tokens", HUGE_ID), "--max-tokens", "16777216"),
        (("soak", "--sessions", "9" * 400), "--sessions", "(400 characters)"),
        (("ledger", "prune", "--older-than", "99999999999d"), "--older-than", "100 years"),
        (("ledger", "prune", "--older-than", "9" * 400 + "d"), "--older-than", "100 years"),
    ],
)
def test_a_huge_number_is_a_usage_error_naming_the_option(
    args: tuple[str, ...], option: str, said: str, tmp_path: Path
) -> None:
    done = run_cli(*args, "--ledger", str(tmp_path / "l.db"), cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"Invalid value for '{option}'" in done.stderr and said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "unexpected" not in done.stderr
    assert not re.search(r"\d{30}", done.stderr), done.stderr  # M7: never 300 digits
    assert not (tmp_path / "l.db").exists()  # refused before anything was opened


@pytest.mark.parametrize(("command", "what"), [("ab", "A/B"), ("tune", "tune")])
def test_resume_of_an_id_past_sqlite_names_nothing(command: str, what: str, tmp_path: Path) -> None:
    ledger = tmp_path / "l.db"
    with Ledger.open(ledger):  # a ledger that holds no A/B and no tune
        pass
    done = run_cli(command, "--resume", HUGE_ID, "--ledger", str(ledger), cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"no {what} {HUGE_ID} in the" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "unexpected" not in done.stderr


def test_the_stores_find_no_row_for_an_id_sqlite_cannot_hold(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        for ident in (2**63, -(2**63) - 1, 10**20):
            assert AbJournal(ledger).get(ident) is None
            assert TuneStore(ledger).get(ident) is None
        assert AbJournal(ledger).get(2**63 - 1) is None  # the largest SQLite id: asked, not there
