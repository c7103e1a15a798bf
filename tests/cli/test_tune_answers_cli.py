"""``servelab tune`` drops an arm that changes answers, on a real stack of its own (simulated
workers whose bf16 index keys alter answers, the real router): a file apart from
tests/cli/test_tune_cli.py, so that the parallel pass can run it beside that file's shared stack."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import run_cli
from tests.support.specs import write_pd_spec

BF16 = "SGLANG_NSA_INDEX_KEYS_BF16"


@pytest.mark.timeout(240)
def test_tune_drops_an_arm_that_changes_answers(tmp_path: Path) -> None:
    """The bf16 index keys are faster in the simulator but alter one answer in three above 16
    running requests: after the first block (21 probes per visit at C64) the arm is dropped for
    its answers, never the best, and the tune's record says why."""
    spec = str(write_pd_spec(tmp_path, knob="512", time_scale=0.05,
                             knobs=("SGLANG_SM120_MMA_TARGET_CTAS", BF16),
                             decode_toml=f'reads_env = ["{BF16}"]\n'))  # fmt: skip
    ledger = str(tmp_path / "ledger.db")
    assert run_cli("up", "-f", spec, "--ledger", ledger).returncode == 0
    try:
        done = run_cli(
            "tune", "-f", spec, "--ledger", ledger, "--knob", f"decode:{BF16}=0,1",
            "--concurrency", "64", "--requests", "400", "--warmup", "4", "--input-len", "32",
            "--output-len", "16", "--max-rounds", "3", "--keep", "best", "--json", timeout=220,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        assert doc["dropped"] == ["1"] and doc["best"] != "1"
        (judged,) = doc["answers"]
        assert judged["candidate"]["arm"] == "1" and judged["verdict"]["outcome"] == "changed"
        assert judged["verdict"]["low"] > 0 and judged["baseline"]["wrong"] == 0
        assert "arm 1 dropped: it changes answers" in done.stderr
        live = run_cli("knob", "diff", "decode", BF16, "-f", spec, "--json")
        assert json.loads(live.stdout)["live"] in (None, "0")
    finally:
        run_cli("down", "-f", spec, "--ledger", ledger)
