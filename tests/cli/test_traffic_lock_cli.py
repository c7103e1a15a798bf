"""Traffic and changes as operators mix them, on the 2P2D example as real processes: a
``bench -f SPEC`` holds the measurement lock, a ``restart --rolling`` runs under it with no request
failed, while a plain ``restart`` is refused naming the bench, and so is a second spec that names
the same processes under another state directory (the lock is the deployment's endpoints', not a
state directory's)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from servelab.io.lock import TRAFFIC_FILE, holder_of
from servelab.sim.settings import ENV_EXTRAS
from tests.support import run_cli
from tests.support.processes import listening
from tests.support.xpyd import write_2p2d_spec


def _until_held_by(place: Path, file: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while (holder := holder_of(place, file)) is None or holder.pid != proc.pid:
        assert time.monotonic() < deadline and proc.poll() is None, "it never took the lock"
        time.sleep(0.05)


@pytest.mark.timeout(400)
def test_a_rolling_restart_runs_under_a_bench_and_a_plain_restart_is_refused(
    tmp_path: Path,
) -> None:
    spec_path, ports = write_2p2d_spec(tmp_path)
    spec = str(spec_path)
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db"), ENV_EXTRAS: ""}
    # the same processes under another state directory (and ledger): one deployment to the lock
    other = tmp_path / "other.toml"
    other.write_text(re.sub(r'state_dir = ".*"', 'state_dir = "state-2"', spec_path.read_text()))
    bench: subprocess.Popen[str] | None = None
    try:
        up = run_cli("up", "-f", spec, env=env, timeout=200)
        assert up.returncode == 0, up.stdout + up.stderr
        bench = subprocess.Popen(
            [
                *(sys.executable, "-m", "servelab", "bench", "-f", spec, "--json"),
                *("--concurrency", "4", "--requests", "20000", "--deadline", "240"),
                *("--output-len", "32", "--input-len", "64"),
            ],
            cwd=tmp_path,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _until_held_by(tmp_path / "state", TRAFFIC_FILE, bench)
        busy = f"deployment local-2p2d is busy: `servelab bench` (pid {bench.pid}, since "
        for argv in (("restart", "decode-1", "-f", spec), ("down", "-f", str(other))):
            refused = run_cli(*argv, env=env, timeout=60)
            assert refused.returncode == 1, refused.stdout + refused.stderr
            assert busy in " ".join(refused.stderr.split())
        assert all(listening(port) for port in ports[:7])  # nothing was stopped
        roll = run_cli(
            "restart", "--rolling", "decode-1", "-f", spec, "--json", env=env, timeout=200
        )
        assert roll.returncode == 0, roll.stdout + roll.stderr
        assert json.loads(roll.stdout)["ok"]
        assert bench.poll() is None, "the bench ended before the rolling restart did"
        bench.send_signal(signal.SIGINT)
        out, err = bench.communicate(timeout=120)
        assert bench.returncode == 128 + signal.SIGINT, err
        doc = json.loads(out)
        assert doc["interrupted"] is True
        # no request failed: only those in flight when the bench was stopped are cut, counted as
        # cut, not failed: at most two per user (a user's next request is written from the read
        # that ended its previous one, ops/bench/load.Chain: a stop just then may find both
        # records open; 5 cut at concurrency 4 once, in a whole run)
        (level,) = doc["levels"]
        assert level["failures"] == {} and level["failed"] == 0, level
        assert level["cut"] == doc["cut"] <= 2 * 4, level
        assert sum(level["ok"] for level in doc["levels"]) > 0
        assert holder_of(tmp_path / "state", TRAFFIC_FILE) is None  # released
    finally:
        if bench is not None and bench.poll() is None:
            bench.kill()
            bench.communicate(timeout=30)
        down = run_cli("down", "-f", spec, env=env, timeout=120)
    assert down.returncode == 0, down.stderr
    assert not any(listening(port) for port in ports)
