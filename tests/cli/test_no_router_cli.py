"""A deployment without a router or proxy (issue 38, defect 11): ``restart`` restarted the
service, then exited 2 ("the deployment has no router or proxy") with no steps in ``--json``, and
``verify`` exited 2. Now the e2e layer is skipped, said so with its reason, and the other layers
decide. A real simulated decode on a free port."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import free_port, run_cli
from tests.support.specs import write_decode_spec


@pytest.fixture
def lone(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    spec = write_decode_spec(tmp_path, free_port(), env_text="SERVELAB_SIM_TIME_SCALE=0.05\n")
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    up = run_cli("up", "-f", str(spec), env=env, timeout=120)
    assert up.returncode == 0, up.stderr
    try:
        yield spec, env
    finally:
        run_cli("down", "-f", str(spec), env=env, timeout=120)


def test_restart_and_verify_skip_the_e2e_layer_without_a_router(
    lone: tuple[Path, dict[str, str]],
) -> None:
    """Defect 11 (issue 38)."""
    spec, env = lone
    done = run_cli("restart", "decode", "-f", str(spec), "--json", env=env, timeout=180)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] and doc["steps"], doc
    assert [step["outcome"] for step in doc["steps"]] == ["ok"]
    assert doc["verification"]["ok"]
    (skipped,) = [c for c in doc["verification"]["checks"] if c["layer"] == "e2e"]
    assert skipped["code"] == "e2e.skipped" and skipped["reason"] == "no_entry_point"
    assert skipped["ok"] and skipped["detail"].startswith("skipped: the deployment has no router")
    assert skipped["result"] == "skip"  # a low of issue 38's later pass: it read as a pass
    verified = run_cli("verify", "-f", str(spec), env=env, timeout=120)
    assert verified.returncode == 0, verified.stderr
    assert "skipped: the deployment has no router or proxy" in verified.stdout
    (row,) = [line for line in verified.stdout.splitlines() if "skipped: the deployment" in line]
    assert "SKIP" in row and "PASS" not in row, row
    assert ", 1 skipped" in verified.stdout
    doc = json.loads(run_cli("verify", "-f", str(spec), "--json", env=env, timeout=120).stdout)
    results = {check["layer"]: check["result"] for check in doc["checks"]}
    assert results["e2e"] == "skip" and results["health"] == "pass", results
