"""``servelab tune`` refuses a grid past its arm cap (issue 38, fourteenth pass): the arms are
counted (the product of the knobs' value counts) before any arm is built, the spec read or the
ledger written, with and without ``--plan``, in bounded time and memory. A file apart from
tests/cli/test_tune_cli.py (its shared stack): nothing here needs one."""

from __future__ import annotations

import json
import math
from pathlib import Path

from servelab.core.ab.factorial import LETTERS
from servelab.core.ab.result import AbDesign, AbResult, ArmVisit, conclude
from servelab.core.ab.tunerun import MAX_ARMS
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tunes import TuneStore
from tests.support import run_cli
from tests.support.peakrss import run_measured
from tests.support.specs import write_pd_spec

CTAS = "decode:SGLANG_SM120_MMA_TARGET_CTAS"
OVERLAP = "decode:--disable-overlap-schedule=on,off"
#: The pass's grid: 2,460 CTAS values by a flag's two, 4,920 arms.
GRID = ("--knob", f"{CTAS}={','.join(str(v) for v in range(1, 2461))}", "--knob", OVERLAP)
#: A refusal's peak RSS: the interpreter and click (about 70 MB); the pass saw 1 GB.
MAX_MB = 200


def _recorded_ab(ledger_file: Path) -> None:
    """An A/B of the CTAS with noise to simulate from (``--plan`` then runs the rule K-wide)."""
    own = {"256": (0.0, 0.01, -0.01, 0.005), "512": (0.012, -0.004, 0.0, -0.01)}
    visits = tuple(
        ArmVisit(arm, rnd, None, arm, {64: base * math.exp(own[arm][rnd])}, 0)
        for rnd in range(4) for arm, base in (("256", 1500.0), ("512", 1700.0))
    )  # fmt: skip
    result = conclude(AbResult("decode", "SGLANG_SM120_MMA_TARGET_CTAS", "256", "512",
                               visits=visits, design=AbDesign(concurrencies=(64,))))  # fmt: skip
    with Ledger.open(ledger_file) as ledger:
        ledger.record_ab(config={}, result=result)


def _refused(tmp_path: Path, *args: str) -> str:
    done, mb = run_measured(["tune", *args], tmp_path / "mark", timeout=60)
    assert done.returncode == 2, done.stderr + done.stdout
    assert mb < MAX_MB, mb
    assert "Traceback" not in done.stderr
    return " ".join(done.stderr.split())


def _spec(tmp_path: Path) -> str:
    """A stack's spec on free ports (none started): never the reference incident's ports."""
    return str(write_pd_spec(tmp_path, knobs=("SGLANG_SM120_MMA_TARGET_CTAS",
                                              "--disable-overlap-schedule")))  # fmt: skip


def test_a_grid_past_the_cap_is_refused_with_and_without_plan(tmp_path: Path) -> None:
    ledger_file = tmp_path / "ledger.db"
    _recorded_ab(ledger_file)
    before = ledger_file.read_bytes()
    led = ("-f", _spec(tmp_path), "--ledger", str(ledger_file), "--concurrency", "64")
    for extra in (("--plan",), ("--max-minutes", "1"), ("--plan", "--max-minutes", "1")):
        said = _refused(tmp_path, *GRID, *led, *extra)
        assert f"4,920 arms (2,460 × 2 values), more than a tune takes ({MAX_ARMS})" in said
        assert "fewer values per --knob" in said and "--screen" in said
    assert ledger_file.read_bytes() == before  # no journal, no tune row
    assert not (tmp_path / "state").exists()  # no lock taken, no restart


def test_a_hostile_grid_is_refused_quickly_in_bounded_memory(tmp_path: Path) -> None:
    many = ["-f", _spec(tmp_path), "--ledger", str(tmp_path / "l.db")]
    many += [a for i in range(3000) for a in ("--knob", f"decode:K{i}=a,b,c")]
    said = _refused(tmp_path, *many)
    assert "about 10^1431 arms (3 × 3 × 3 × 3 × 3 × 3 × … values)" in said
    wide = _refused(tmp_path, *many[:4], "--knob", f"{CTAS}={','.join(map(str, range(20_000)))}")
    assert "20,000 arms (20,000 values)" in wide
    big = "x" * 60_000  # nine knobs of two 60 kB values: 512 arms, 1 MB of argv
    huge = [a for i in range(9) for a in ("--knob", f"decode:K{i}={big},{big}y")]
    assert "512 arms (2 × 2 × 2 × 2 × 2 × 2 × … values)" in _refused(tmp_path, *many[:4], *huge)
    assert not (tmp_path / "l.db").exists()


def test_every_screenings_follow_up_fits_under_the_cap() -> None:
    """A screening takes up to ``len(LETTERS)`` knobs at two values each: its full grid fits."""
    assert 2 ** len(LETTERS) <= MAX_ARMS


def _recorded_tune(ledger_file: Path) -> None:
    """A tune of one finished visit of 2 minutes (90 s to make it live, 30 s of runs)."""
    with Ledger.open(ledger_file) as ledger:
        store = TuneStore(ledger)
        tune = store.start(knobs="decode:SGLANG_SM120_MMA_TARGET_CTAS", config={}, original=["1"])
        store.add_visit(tune, 0, ArmVisit("256", 0, None, "256", {64: 1500.0}, 0,
                                          overhead_s=90.0, bench_s={64: 30.0}))  # fmt: skip


def test_a_plan_past_its_budget_says_so_before_any_tune_starts(tmp_path: Path) -> None:
    """``tune --plan --max-minutes 1`` of a 3-arm grid at 2 minutes a visit: the first block
    alone takes 6 minutes, said in the plan, its ``--json`` and on stderr, as the tune says it
    before its first visit; within the budget, or with nothing recorded to price it, nothing."""
    ledger_file = tmp_path / "ledger.db"
    _recorded_ab(ledger_file)
    args = ("tune", "--plan", "--knob", f"{CTAS}=256,512,768", "--concurrency", "64",
            "-f", _spec(tmp_path), "--ledger", str(ledger_file))  # fmt: skip
    unpriced = run_cli(*args, "--max-minutes", "1", "--json", timeout=120)
    assert unpriced.returncode == 0 and "over_budget" not in json.loads(unpriced.stdout)
    _recorded_tune(ledger_file)
    warning = ("warning: --max-minutes 1 is shorter than the first block: 3 visit(s) at 120.0 s "
               "each (the latest recorded tune's mean visit) take about 6.0 min")  # fmt: skip
    text = run_cli(*args, "--max-minutes", "1", timeout=120)
    assert text.returncode == 0 and warning in " ".join(text.stdout.split()), text.stdout
    as_json = run_cli(*args, "--max-minutes", "1", "--json", timeout=120)
    assert json.loads(as_json.stdout)["over_budget"] == {
        "visits": 3, "visit_s": 120.0, "priced_from": "recorded", "first_block_min": 6.0,
        "full_min": 72.0, "max_minutes": 1.0,
    }  # fmt: skip
    assert warning in " ".join(as_json.stderr.split()), as_json.stderr
    within = run_cli(*args, "--max-minutes", "7", "--json", timeout=120)
    assert within.returncode == 0 and "over_budget" not in json.loads(within.stdout)
    assert "warning" not in within.stderr
