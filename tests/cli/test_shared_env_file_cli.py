"""Two decode replicas sharing one env file (the 2P2D example with ``decode-2`` reading
``decode-1``'s ``env/decode.env``), for real: a change to the file is a change to both, so
``knob set`` names the other replica, ``restart`` restarts both, and each arm of an ``ab`` is
made live (and verified, and read back) on both; afterwards ``verify`` passes (never one replica
left on the file's old value while it takes half the router's traffic)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import run_cli
from tests.support.xpyd import write_2p2d_spec

KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"


@pytest.mark.timeout(420)
def test_an_arm_and_a_restart_cover_every_reader_of_a_shared_env_file(tmp_path: Path) -> None:
    spec_path, _ = write_2p2d_spec(tmp_path)
    text = spec_path.read_text()
    assert text.count('env_file = "env/decode-2.env"') == 1
    spec_path.write_text(
        text.replace('env_file = "env/decode-2.env"', 'env_file = "env/decode.env"')
    )
    spec, ledger = str(spec_path), str(tmp_path / "ledger.db")
    assert run_cli("up", "-f", spec, "--ledger", ledger, timeout=180).returncode == 0
    try:
        done = run_cli("knob", "set", "decode-1", f"{KNOB}=384", "-f", spec, "--ledger", ledger)
        assert done.returncode == 0, done.stderr
        assert "decode-2 reads the same file and runs with 512" in done.stdout, done.stdout
        done = run_cli("restart", "decode-1", "-f", spec, "--ledger", ledger, timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "restart plan: decode-1 -> decode-2 -> router" in done.stdout + done.stderr
        done = run_cli("verify", "-f", spec, "--ledger", ledger, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        done = run_cli(
            "ab", "-f", spec, "--ledger", ledger, "--knob", f"decode-1:{KNOB}=256,384",
            "--concurrency", "8", "--repeat", "1", "--requests", "24", "--warmup", "2",
            "--input-len", "32", "--output-len", "8", timeout=300,
        )  # fmt: skip
        assert done.returncode in (0, 1), done.stdout + done.stderr
        assert "restart plan: decode-1 -> decode-2 -> router" in done.stderr, done.stderr
        for value in ("256", "384"):
            for service in ("decode-1", "decode-2"):
                said = f"{service} {KNOB}={value}, verified live"
                assert said in done.stderr, done.stderr
        done = run_cli("verify", "-f", spec, "--ledger", ledger, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        run_cli("down", "-f", spec, "--ledger", ledger, timeout=120)
