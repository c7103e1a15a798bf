"""``servelab verify`` end to end: the real CLI, sim workers and the real router on free ports.

The drift scenario of the reference incident, locally and over a real loopback sshd: bring the
stack up, edit the decode's env file without a restart (verify fails the live layer, exit 1),
``servelab restart decode`` (verify passes, exit 0). Locally also a killed decode (health and e2e
fail with reasons). A secret in the env file never reaches stdout, stderr, --json or the ledger.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.verify.record import VerificationRecord
from servelab.io.ledger.ledger import Ledger
from tests.support import run_cli
from tests.support.specs import ROUTER_KINDS, SECRET, write_pd_spec

FLAG = "SERVELAB_TEST_FLAG"


def _write(
    root: Path, host: str | None = None, hosts_toml: str = "", router_kind: str | None = None
) -> Path:
    write_pd_spec(
        root,
        router_kind=router_kind,
        worker_env="SERVELAB_SIM_WARMUP_S=4\n",
        secret=SECRET,
        name="verify-cli",
        knobs=(DEFAULT_KNOB, FLAG),
        host=host,
        hosts_toml=hosts_toml,
    )
    return root


@pytest.fixture
def outputs() -> Iterator[list[str]]:
    """Every stdout/stderr of the test, checked for the secret at the end."""
    seen: list[str] = []
    yield seen
    assert not [text for text in seen if SECRET in text]


def _cli(seen: list[str], root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    ledger = {"SERVELAB_LEDGER": str(root / "state" / "ledger.db")}
    done = run_cli(*args, cwd=root, timeout=110, env=ledger)
    seen += [done.stdout, done.stderr]
    return done


def _checks(done: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    doc = json.loads(done.stdout)
    assert doc["ok"] is (done.returncode == 0)
    return list(doc["checks"])


def _drift_then_restart(seen: list[str], root: Path) -> None:
    first = _cli(seen, root, "verify", "--json")
    assert first.returncode == 0, first.stdout + first.stderr
    assert {c["layer"] for c in _checks(first)} == {"config", "live", "pair", "health", "e2e"}

    with (root / "env" / "decode.env").open("a") as env_file:
        env_file.write(f"{FLAG}=1\n")
    drift = _cli(seen, root, "verify")
    assert drift.returncode == 1
    assert "in file but not live: restart needed" in drift.stdout
    drift_json = _cli(seen, root, "verify", "--json", "decode", "--layer", "live")
    assert drift_json.returncode == 1
    failed = [c for c in _checks(drift_json) if not c["ok"]]
    assert [(c["layer"], c["service"], c["knob"]) for c in failed] == [("live", "decode", FLAG)]
    assert failed[0]["code"] == "live.restart_needed"
    assert str(failed[0]["detail"]).startswith("in file but not live: restart needed")

    restart = _cli(seen, root, "restart", "decode")
    assert restart.returncode == 0, restart.stdout + restart.stderr
    after = _cli(seen, root, "verify", "--json")
    assert after.returncode == 0, after.stdout
    live = [c for c in _checks(after) if c["layer"] == "live" and c.get("knob") == FLAG]
    assert live[0]["detail"] == "live 1 = file" and live[0]["code"] == "live.match"


def _assert_ledger(root: Path, tail: list[bool]) -> None:
    """Every verification was recorded (``restart`` records its own in between), no secret."""
    with Ledger.open(root / "state" / "ledger.db") as ledger:
        oks = [row.ok for row in ledger.list(VerificationRecord)]
    assert oks[:3] == [True, False, False] and oks[-len(tail) :] == tail, oks
    for db in (root / "state").glob("ledger.db*"):
        assert SECRET.encode() not in db.read_bytes(), db


@pytest.mark.parametrize("kind", ROUTER_KINDS)
def test_drift_restart_and_killed_decode(kind: str, tmp_path: Path, outputs: list[str]) -> None:
    root = _write(tmp_path, router_kind=kind)
    up = _cli(outputs, root, "up")
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        _drift_then_restart(outputs, root)
        record = json.loads((root / "state" / "run" / "decode.json").read_text())
        os.killpg(record["pgid"], signal.SIGKILL)
        dead = _cli(outputs, root, "verify", "--json", "--e2e-timeout", "30")
        assert dead.returncode == 1
        reasons = {(c["layer"], c["service"]): c for c in _checks(dead) if not c["ok"]}
        assert "/health: unreachable" in str(reasons["health", "decode"]["detail"])
        assert str(reasons["e2e", "router"]["detail"]).startswith("chat completion failed")
        assert reasons["health", "decode"]["code"] == "health.unreachable"
        assert reasons["e2e", "router"]["code"] == "e2e.failed"
    finally:
        _cli(outputs, root, "down")
    _assert_ledger(root, [True, False])


def test_drift_over_ssh(tmp_path: Path, outputs: list[str]) -> None:
    from tests.support.sshd import start_sshd

    server = start_sshd(tmp_path / "sshd")
    try:
        root = _write(tmp_path / "deploy", "remote", server.host_toml("remote"))
        up = _cli(outputs, root, "up")
        assert up.returncode == 0, up.stdout + up.stderr
        try:
            _drift_then_restart(outputs, root)
        finally:
            _cli(outputs, root, "down")
    finally:
        server.stop()
    _assert_ledger(root, [True])


def test_bad_spec_exits_2(tmp_path: Path) -> None:
    (tmp_path / "servelab.toml").write_text('[services.x]\nrole = "decode"\nurl = "nope"\n')
    done = run_cli("verify", cwd=tmp_path)
    assert done.returncode == 2 and "services.x" in done.stderr
    unknown = run_cli("verify", "nope", "-f", str(tmp_path / "missing.toml"), cwd=tmp_path)
    assert unknown.returncode == 2


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_an_e2e_timeout_that_is_no_duration_is_refused(value: str) -> None:
    done = run_cli("verify", "--e2e-timeout", value)
    assert done.returncode == 2 and "Invalid value for '--e2e-timeout'" in done.stderr
