"""Two decode replicas sharing one ``config_file`` (the 2P2D example with ``decode-1`` and
``decode-2`` both reading ``decode.yaml`` with ``--config``), for real: a change to the file is a
change to both, so ``restart`` restarts both and each arm of an ``ab`` is made live, verified and
read back on both, as for a shared env file (tests/cli/test_shared_env_file_cli.py): never one
replica said "verified live" while the other, restarted on the same file, goes unread."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import run_cli
from tests.support.xpyd import write_2p2d_spec

KNOB = "--max-running-requests"


@pytest.mark.timeout(420)
@pytest.mark.parametrize("own", [None, "8"], ids=["shared", "decode-2-args-env-wins"])
def test_an_arm_reads_back_every_reader_of_a_shared_config_file(
    tmp_path: Path, own: str | None
) -> None:
    """``own``: decode-2's own ``args_env`` sets the knob too (its command line wins over
    ``--config``): decode-2 is restarted and read back at that value, never said to run the
    arm's."""
    spec_path, _ = write_2p2d_spec(tmp_path)
    text = spec_path.read_text()
    for name in ("decode", "decode-2"):
        old = f'env_file = "env/{name}.env"\nknobs = ["SGLANG_SM120_MMA_TARGET_CTAS"]'
        assert text.count(old) == 1, name
        args_env = 'args_env = "DECODE_ARGS"\n' if own and name == "decode-2" else ""
        text = text.replace(
            old,
            f'env_file = "env/{name}.env"\nconfig_file = "decode.yaml"\n{args_env}'
            f'knobs = ["SGLANG_SM120_MMA_TARGET_CTAS", "{KNOB}"]',
        )
    spec_path.write_text(text)
    if own:
        env = tmp_path / "env" / "decode-2.env"
        env.write_text(env.read_text() + f'DECODE_ARGS="{KNOB} {own}"\n')
    yaml = "# both decodes' engine settings\nmax-running-requests: 32\n"
    (tmp_path / "decode.yaml").write_text(yaml)
    spec, ledger = str(spec_path), str(tmp_path / "ledger.db")
    assert run_cli("up", "-f", spec, "--ledger", ledger, timeout=180).returncode == 0
    try:
        done = run_cli(
            "ab", "-f", spec, "--ledger", ledger, "--knob", f"decode-1:{KNOB}=24,16",
            "--concurrency", "8", "--repeat", "1", "--requests", "24", "--warmup", "2",
            "--input-len", "32", "--output-len", "8", timeout=300,
        )  # fmt: skip
        assert done.returncode in (0, 1), done.stdout + done.stderr
        assert "restart plan: decode-1 -> decode-2 -> router" in done.stderr, done.stderr
        for value in ("24", "16"):
            assert f"decode-1 {KNOB}={value}, verified live" in done.stderr, done.stderr
            said = f"decode-2 {KNOB}={own or value}, verified live"
            assert said in done.stderr, done.stderr
        if own:
            assert f"decode-2 {KNOB}=24" not in done.stderr, done.stderr
        assert "max-running-requests: 32" in (tmp_path / "decode.yaml").read_text()
        done = run_cli("verify", "-f", spec, "--ledger", ledger, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        run_cli("down", "-f", spec, "--ledger", ledger, timeout=120)
