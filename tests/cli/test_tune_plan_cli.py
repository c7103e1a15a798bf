"""``servelab tune`` without a stack: a screened knob takes exactly two values (exit 2), and
``--plan`` simulates the rule on a recorded A/B's noise. A file apart from
tests/cli/test_tune_cli.py (its shared stack), so that the parallel pass can run it beside it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from servelab.core.ab.result import AbDesign, AbResult, ArmVisit, conclude
from servelab.io.ledger.ledger import Ledger
from tests.support import run_cli

CAP = "--max-running-requests"
REPORT = "--enable-cache-report"


def _cli(*args: str, code: int = 0) -> Any:
    done = run_cli(*args, "--json", timeout=600)
    assert done.returncode == code, done.stderr + done.stdout
    return json.loads(done.stdout), done.stderr


def test_a_screened_knob_takes_exactly_two_values() -> None:
    done = run_cli("tune", "--screen", "--knob", f"decode:{CAP}=4,32,64", "--knob",
                   f"decode:{REPORT}=off,on", timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"screening takes each knob at exactly two values: {CAP} has 3" in done.stderr


def _recorded_ab(ledger: Ledger) -> int:
    """An A/B of the decode's CTAS as ``ab`` records one: 4 rounds of 256 and 512 at C64."""
    shared, own = (0.01, -0.02, 0.015, -0.005), {"256": (0.0, 0.01, -0.01, 0.005),
                                                  "512": (0.012, -0.004, 0.0, -0.01)}  # fmt: skip
    visits = tuple(
        ArmVisit(arm, rnd, None, arm, {64: base * math.exp(shared[rnd] + own[arm][rnd])}, 0)
        for rnd in range(4) for arm, base in (("256", 1500.0), ("512", 1700.0))
    )  # fmt: skip
    result = conclude(AbResult("decode", "SGLANG_SM120_MMA_TARGET_CTAS", "256", "512",
                               visits=visits, design=AbDesign(concurrencies=(64,))))  # fmt: skip
    return ledger.record_ab(config={}, result=result)


def test_a_plan_simulates_the_rule_on_the_recorded_noise(tmp_path: Path) -> None:
    ledger_file = tmp_path / "ledger.db"
    with Ledger.open(ledger_file) as ledger:
        ab_id = _recorded_ab(ledger)
    led = ("--ledger", str(ledger_file))
    knob = "decode:SGLANG_SM120_MMA_TARGET_CTAS=256,512,768"
    plan, _ = _cli("tune", "--knob", knob, "--plan", "--concurrency", "64,96", *led)
    assert plan["arms"] == 3 and plan["ab_ids"] == [ab_id] and plan["effect"] == 0.05
    at64, at96 = plan["levels"]
    assert at96["check"] is None  # nothing recorded at C96: nothing to simulate from
    check = at64["check"]
    assert check["runs"] == 200 and check["full_visits"] == 3 * 12
    assert 3 <= check["mean_blocks"] <= 12 and check["mean_visits"] < check["full_visits"]
