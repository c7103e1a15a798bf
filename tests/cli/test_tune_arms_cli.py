"""``servelab tune`` refuses a grid past its arm cap (issue 38, fourteenth pass): the arms are
counted (the product of the knobs' value counts) before any arm is built, the spec read or the
ledger written, with and without ``--plan``, in bounded time and memory. A file apart from
tests/cli/test_tune_cli.py (its shared stack): nothing here needs one."""

from __future__ import annotations

import math
from pathlib import Path

from servelab.core.ab.factorial import LETTERS
from servelab.core.ab.result import AbDesign, AbResult, ArmVisit, conclude
from servelab.core.ab.tunerun import MAX_ARMS
from servelab.io.ledger.ledger import Ledger
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
