"""`servelab ab` as a real process: bad input refused before anything runs, ``--plan`` from the
recorded noise, and against a real stack (sim workers + the real router) a faster setting that
changes answers refused. An A/B on each SGLang router (JSON shape, files written, the knob
restored) is tests/cli/test_ab_routers_cli.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.core.ab.result import AbArm, AbResult
from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.io.ledger.ledger import Ledger
from tests.support import run_cli
from tests.support.specs import write_pd_spec


@pytest.mark.parametrize(
    ("knob", "words"),
    [("decode-256,512", "SERVICE:NAME=BASELINE,CANDIDATE"), ("ghost:K=1,2", "unknown service")],
)
def test_bad_knob_argument_exits_2(tmp_path: Path, knob: str, words: str) -> None:
    spec = str(write_pd_spec(tmp_path))
    result = run_cli("ab", "-f", spec, "--knob", knob, "--ledger", str(tmp_path / "l.db"))
    assert result.returncode == 2
    assert words in result.stderr


def test_plan_sizes_an_ab_from_the_recorded_noise(tmp_path: Path) -> None:
    spec = str(write_pd_spec(tmp_path))
    ledger_path = tmp_path / "ledger.db"
    arms = (
        AbArm("256", (), {64: (1000.0, 1012.0, 994.0), 80: (1100.0, 1105.0, 1096.0)}),
        AbArm("512", (), {64: (1128.0, 1120.0, 1135.0), 80: (1110.0, 1102.0, 1117.0)}),
    )
    record = AbResult(service="decode", knob=DEFAULT_KNOB, baseline="256", candidate="512",
                      arms=arms)  # fmt: skip
    with Ledger.open(ledger_path) as ledger:
        ledger.record_ab(config={}, result=record)
    args = ("ab", "-f", spec, "--ledger", str(ledger_path), "--knob",
            f"decode:{DEFAULT_KNOB}=256,512", "--concurrency", "64,80,96", "--plan",
            "--effect", "2%")  # fmt: skip
    result = run_cli(*args, "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["ab_ids"] == [1] and doc["effect"] == 0.02
    by_c = {p["concurrency"]: p for p in doc["fixed"]}
    assert by_c[64]["rounds"] >= 2 and by_c[80]["rounds"] >= 2
    assert by_c[96]["rounds"] is None  # nothing recorded at C96
    assert [n["groups"] for n in doc["noise"]] == [2, 2, 0]
    text = run_cli(*args)
    assert text.returncode == 0 and "| 96 | 0 | no recorded noise |" in text.stdout


def test_resume_of_an_unknown_ab_exits_2(tmp_path: Path) -> None:
    spec = str(write_pd_spec(tmp_path))
    result = run_cli("ab", "-f", spec, "--resume", "9", "--ledger", str(tmp_path / "l.db"))
    assert result.returncode == 2, result.stderr
    assert "no A/B 9" in result.stderr


def test_a_knob_with_resume_is_refused_not_ignored(tmp_path: Path) -> None:
    """A journalled A/B keeps its own knob and values: ``--knob`` beside ``--resume`` is a usage
    error (issue: it was silently ignored), before any ledger or deployment is touched."""
    spec = write_pd_spec(tmp_path)
    done = run_cli("ab", "-f", str(spec), "--knob", f"decode:{DEFAULT_KNOB}=256,512",
                   "--resume", "1", "--ledger", str(tmp_path / "l.db"))  # fmt: skip
    assert done.returncode == 2
    assert "--resume continues the journalled A/B with its own knob and values" in done.stderr
    assert not (tmp_path / "l.db").exists()


BF16 = "SGLANG_NSA_INDEX_KEYS_BF16"
#: The incident's build reads its kernel knobs (SGLang's own registry lists neither).
READS_BF16 = f'reads_env = ["{DEFAULT_KNOB}", "{BF16}"]\n'


@pytest.mark.timeout(300)
def test_ab_refuses_a_faster_setting_that_changes_answers(tmp_path: Path) -> None:
    """The incident's bf16 index keys on the simulator: one greedy answer in three altered above
    16 running requests. At C64 the probes inside the A/B's own visits show it (the interval
    excludes 0), the A/B does not keep it even with ``--keep better``, and exits non-zero."""
    spec = str(write_pd_spec(tmp_path, knob="512", time_scale=0.05, knobs=(DEFAULT_KNOB, BF16),
                             decode_toml=READS_BF16))  # fmt: skip
    ledger = str(tmp_path / "ledger.db")
    assert run_cli("up", "-f", spec, "--ledger", ledger).returncode == 0
    try:
        result = run_cli(
            "ab", "-f", spec, "--ledger", ledger, "--knob", f"decode:{BF16}=0,1",
            "--concurrency", "64", "--repeat", "2", "--requests", "300", "--warmup", "4",
            "--output-len", "16", "--input-len", "32", "--keep", "better", "--json",
            timeout=280,
        )  # fmt: skip
        assert result.returncode == 1, result.stderr
        doc = json.loads(result.stdout)
        answers = doc["answers"]
        verdict = answers["verdict"]
        assert verdict["outcome"] == "changed" and verdict["low"] > 0, verdict
        assert verdict["n"] >= 20 and verdict["baseline_wrong"] == 0
        assert answers["candidate"]["wrong"] > 0 and answers["baseline"]["wrong"] == 0
        assert answers["probes"] / (answers["probes"] + answers["requests"]) <= 0.05
        assert doc.get("kept") is None
        assert doc["restored"] is True
        assert "changes answers" in result.stderr and "for the baseline" in result.stderr
        knob = run_cli("knob", "diff", "decode", BF16, "-f", spec, "--json")
        assert json.loads(knob.stdout)["live"] in (None, "0")
        with Ledger.open(Path(ledger)) as book:
            rows = book._read  # the references are kept with the state they came from
            with rows() as conn:
                refs = conn.execute("SELECT key, state FROM answer_references").fetchall()
        ab_refs = [r for r in refs if not r[0].startswith("verify-")]  # verify keeps its own
        assert len(ab_refs) == 1 and BF16 in ab_refs[0][1], refs
    finally:
        run_cli("down", "-f", spec, "--ledger", ledger)
