"""Two decode replicas whose env files are links to one file (issue 38, the twenty-first pass):
``env/decode.env`` and ``env/decode-2.env`` both symbolic links to ``env/shared.env``. The
files are compared by their identity on the host (device and inode, links followed), never by
the path as written: a change to one is a change to both, so ``knob set`` names the other
replica and ``restart decode-1`` restarts ``decode-2`` too (then ``verify`` passes: never one
replica left on the file's old value). Real processes, real links."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import run_cli
from tests.support.xpyd import write_2p2d_spec

KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"


@pytest.mark.timeout(300)
def test_env_files_linked_to_one_file_are_one_file(tmp_path: Path) -> None:
    spec_path, _ = write_2p2d_spec(tmp_path)
    env = tmp_path / "env"
    assert (env / "decode.env").read_bytes() == (env / "decode-2.env").read_bytes()
    (env / "decode.env").rename(env / "shared.env")
    (env / "decode-2.env").unlink()
    for name in ("decode.env", "decode-2.env"):
        (env / name).symlink_to("shared.env")
    spec, ledger = str(spec_path), str(tmp_path / "ledger.db")
    assert run_cli("up", "-f", spec, "--ledger", ledger, timeout=180).returncode == 0
    try:
        done = run_cli("knob", "set", "decode-1", f"{KNOB}=384", "-f", spec, "--ledger", ledger)
        assert done.returncode == 0, done.stderr
        assert "decode-2 reads the same file and runs with 512" in done.stdout, done.stdout
        assert (env / "decode-2.env").is_symlink()  # written through the link: still one file
        assert f"{KNOB}=384" in (env / "shared.env").read_text()
        done = run_cli("restart", "decode-1", "-f", spec, "--ledger", ledger, timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "restart plan: decode-1 -> decode-2 -> router" in done.stdout + done.stderr
        done = run_cli("verify", "-f", spec, "--ledger", ledger, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        run_cli("down", "-f", spec, "--ledger", ledger, timeout=120)
