"""What an engine reports about itself is quoted through the one redaction policy (issue 38's
seventh pass, H3): a real simulated PD pair (the real sglang-router) whose prefill and decode
report different served model names, each holding a token (``m ghp_...``). ``verify`` still
compares the real names (a mismatch, ``pair.mismatch``, exit 1), and its FAIL line, its ``--json``
and the ``verification_checks`` rows say the names with the tokens masked; the model id the e2e
probe names (from ``/v1/models``) is stored masked too."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import run_cli
from tests.support.specs import PdPorts, pd_spec_toml
from tests.support.stack import SimStack, start_stack

PREFILL = "ghp_PPPPplanted0123456789abcdef"
DECODE = "ghp_CCCCplanted0123456789abcdef"


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    st = start_stack(
        time_scale=0.05,
        prefill_args=["--served-model-name", f"m {PREFILL}"],
        decode_args=["--served-model-name", f"m {DECODE}"],
    )
    try:
        yield st
    finally:
        st.stop()


def _cli(root: Path, *args: str) -> str:
    done: subprocess.CompletedProcess[str] = run_cli(
        *args, cwd=root, env={"SERVELAB_LEDGER": str(root / "ledger.db")}, timeout=120
    )
    assert done.returncode == 1, f"{args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


@pytest.mark.timeout(240)
def test_a_token_in_a_reported_model_name_is_masked_and_still_compared(
    stack: SimStack, tmp_path: Path
) -> None:
    text = pd_spec_toml(PdPorts.of(stack), name="named", env_dir=None, knobs=())
    (tmp_path / "servelab.toml").write_text(text)
    said = {"verify": _cli(tmp_path, "verify", "--layer", "pair", "--layer", "e2e")}
    said["verify --json"] = _cli(tmp_path, "verify", "--layer", "pair", "--layer", "e2e", "--json")
    with sqlite3.connect(tmp_path / "ledger.db") as db:
        rows = [" ".join(map(str, row)) for row in db.execute("SELECT * FROM verification_checks")]
    said["verification_checks"] = "\n".join(rows)
    for ledger in tmp_path.glob("ledger.db*"):
        said[ledger.name] = ledger.read_bytes().decode("latin-1")
    leaked = {what: [s for s in (PREFILL, DECODE) if s in text] for what, text in said.items()}
    assert {what: found for what, found in leaked.items() if found} == {}
    assert "prefill -> decode cannot hand off KV" in said["verify"], said["verify"]
    assert "m ***" in said["verify"]
    doc = json.loads(said["verify --json"])
    codes = [check["code"] for check in doc["checks"]]
    assert "pair.mismatch" in codes, codes  # the real names differ: compared before masking


@pytest.mark.timeout(240)
def test_a_token_in_the_listed_model_is_masked_in_a_bench(stack: SimStack, tmp_path: Path) -> None:
    """``bench`` names the model the router lists (the decode's name, token and all: the
    requests carry the real name and succeed) and shows and stores it masked."""
    small = ("--requests", "2", "--input-len", "8", "--output-len", "4", "--json")
    done = run_cli("bench", "--url", stack.router_url, *small, cwd=tmp_path,
                   env={"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    said = {"bench --json": done.stdout + done.stderr}
    for ledger in tmp_path.glob("ledger.db*"):
        said[ledger.name] = ledger.read_bytes().decode("latin-1")
    leaked = {what: [s for s in (PREFILL, DECODE) if s in text] for what, text in said.items()}
    assert {what: found for what, found in leaked.items() if found} == {}
    assert '"model": "m ***"' in done.stdout, done.stdout
