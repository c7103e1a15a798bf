"""Issue 38, eighth hostile pass, the lows: each refused or said before any work, as a real
``servelab`` process in an empty folder (no deployment is touched: every case is refused while
the options are read, or runs nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.io.ledger.ledger import Ledger
from tests.support import run_cli


def _run(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    done = run_cli(*args, cwd=tmp_path, env=env, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("command", ["report", "investigate"])
def test_an_out_that_is_a_device_is_one_line_naming_it(tmp_path: Path, command: str) -> None:
    """``report --out /dev/full``: one line naming the path, exit 1 (the documented code of a
    file that cannot be written), checked before any work (``investigate`` runs no step)."""
    Ledger.open(tmp_path / "ledger.db").close()
    code, _out, err = _run(tmp_path, command, "--out", "/dev/full")
    assert code == 1, err
    assert err.strip() == "error: cannot write /dev/full: it is not a directory", err
    assert not (tmp_path / ".servelab" / "ledger.db").exists()


def test_trace_generate_says_what_its_caps_changed(tmp_path: Path) -> None:
    """``--output-tokens 100000`` wrote every answer at 2,048 tokens without a word."""
    code, out, err = _run(tmp_path, "trace", "generate", "--kind", "chat", "--requests", "5",
                          "--output-tokens", "100000", "--json", str(tmp_path / "t"))  # fmt: skip
    assert code == 0, err
    assert "capped 5 answer(s) cut to 2,048 tokens" in err, err
    capped = json.loads(out)["capped"]
    assert capped["outputs"] == 5 and capped["output_cap"] == 2048 and capped["turns"] == 0
    code, _out, err = _run(tmp_path, "trace", "generate", "--turns", "400", "500", "--force",
                           str(tmp_path / "t.jsonl"))  # fmt: skip
    assert code == 0 and "turn(s) left out: their session's history passed 65,536" in err, err
    code, _out, err = _run(tmp_path, "trace", "generate", str(tmp_path / "u.jsonl"))
    assert code == 0 and "capped" not in err, err


def test_a_knob_value_over_4_kib_is_refused_before_a_tune_plans(tmp_path: Path) -> None:
    huge = "7" * 5000
    code, _out, err = _run(tmp_path, "tune", "--plan", "--knob",
                           f"decode:SGLANG_SM120_MMA_TARGET_CTAS={huge},512")  # fmt: skip
    assert code == 2 and "a value of 5,000 bytes: at most 4,096 (4 KiB)" in err, err
    assert huge not in err


def test_an_ab_plan_checks_both_arms_as_a_tune_does(tmp_path: Path) -> None:
    """``ab --plan`` planned a knob value over 4 KiB and an undeclared knob; ``tune --plan``
    refused both."""
    huge = "7" * 5000
    code, _out, err = _run(tmp_path, "ab", "--plan", "--knob",
                           f"decode:SGLANG_SM120_MMA_TARGET_CTAS={huge},512")  # fmt: skip
    assert code == 2 and "a value of 5,000 bytes: at most 4,096 (4 KiB)" in err, err
    code, _out, err = _run(tmp_path, "ab", "--plan", "--knob", "decode:SGLANG_NOPE=1,2")
    assert code == 2 and "'SGLANG_NOPE' is not a declared knob of 'decode'" in err, err


@pytest.mark.parametrize("command", ["ab", "tune"])
def test_a_plan_for_no_change_is_refused(tmp_path: Path, command: str) -> None:
    code, _out, err = _run(tmp_path, command, "--plan", "--effect", "0", "--knob",
                           "decode:SGLANG_SM120_MMA_TARGET_CTAS=256,512")  # fmt: skip
    assert code == 2 and "'0' is no change: nothing to detect" in err, err


@pytest.mark.parametrize(
    ("option", "value", "bound"),
    [("--repeat", "1001", "1 to 1,000"), ("--repeat", "99999999999999999999", "1 to 1,000"),
     ("--workers", "65", "1 to 64")],
)  # fmt: skip
def test_repeat_and_workers_are_bounded(
    tmp_path: Path, option: str, value: str, bound: str
) -> None:
    code, _out, err = _run(tmp_path, "bench", option, value)
    assert code == 2 and f"Invalid value for '{option}'" in err and bound in err, err
