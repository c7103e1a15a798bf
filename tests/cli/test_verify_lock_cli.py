"""``verify`` holds the deployment's change lock as it reads (issue 38, the tenth pass): while
another command holds it (a restart, mid-way), ``verify`` is refused naming the holder and judges
nothing; with ``--wait`` it says whom it waits for and runs once the lock is free. Beside a
measurement (``bench``'s lock) it runs. Real processes; the holder is this test's process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from servelab.core.deploy.ownership import owned_endpoints
from servelab.io.lock import Hold, hold
from servelab.io.specfile import load_spec
from tests.support import free_ports, run_cli
from tests.support.generic import generic_service, servelab_process


def _spec(tmp_path: Path) -> Path:
    (port,) = free_ports(1)
    spec = tmp_path / "servelab.toml"
    spec.write_text('name = "t"\nstate_dir = "state"\n' + generic_service("a", port))
    return spec


def _verify(tmp_path: Path, spec: Path, *more: str) -> subprocess.CompletedProcess[str]:
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    return run_cli("verify", "-f", str(spec), "--layer", "health", *more, env=env)


def test_verify_is_refused_while_a_change_holds_the_lock_and_waits_with_wait(
    tmp_path: Path,
) -> None:
    spec = _spec(tmp_path)
    loaded = load_spec(spec)
    endpoints = owned_endpoints(loaded.spec)
    with hold(loaded.state_dir, "servelab restart", name="t", endpoints=endpoints) as lock:
        refused = _verify(tmp_path, spec, "--json")
        assert refused.returncode == 1, refused.stdout + refused.stderr
        said = " ".join(refused.stderr.split())
        assert f"deployment t is busy: `servelab restart` (pid {lock.holder.pid}" in said, said
        assert "--wait" in said and "Traceback" not in said
        assert not (tmp_path / "ledger.db").exists()  # nothing judged, nothing recorded
        queued = servelab_process(tmp_path, "verify", "-f", str(spec), "--layer", "health",
                                  "--wait", "--json")  # fmt: skip
        assert queued.stderr is not None
        line = queued.stderr.readline().decode()  # told once whom it waits for
        assert "waiting: `servelab restart`" in line, line
        assert queued.poll() is None
    out, err = queued.communicate(timeout=120)
    assert queued.returncode == 1, err  # a is not up: the health layer fails, as judged now
    assert json.loads(out)["ok"] is False


def test_verify_runs_beside_a_measurement(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    loaded = load_spec(spec)
    with hold(
        loaded.state_dir, "servelab bench", name="t", kind=Hold.MEASURE,
        endpoints=owned_endpoints(loaded.spec),
    ):  # fmt: skip
        done = _verify(tmp_path, spec, "--json")
    assert "busy" not in done.stderr and done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["ok"] is False
