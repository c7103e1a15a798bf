"""`servelab up|status|restart|down` as real processes; the examples parse, the local one runs."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from servelab.io.specfile import load_spec
from tests.support import REPO, free_ports, run_cli
from tests.support.processes import listening, live_procs_under
from tests.support.specs import ROUTER_KINDS

EXAMPLES = sorted((REPO / "examples").glob("*.toml"))
#: The examples that are not the reference prefill/decode/router topology.
EXAMPLE_SERVICES = {
    "local-2p2d.toml": {"prefill-1", "prefill-2", "decode-1", "decode-2", "router"},
    "local-2p2d-smg.toml": {"prefill-1", "prefill-2", "decode-1", "decode-2", "router"},
}
#: The router each example runs (an SGLang example that names no kind: sglang-router).
EXAMPLE_ROUTERS = {"local-2p2d-smg.toml": "smg", "local-vllm.toml": "vllm-router"}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_parses(example: Path) -> None:
    loaded = load_spec(example)
    assert loaded.spec.router_name == "router"
    expected = EXAMPLE_SERVICES.get(example.name, {"prefill", "decode", "router"})
    assert set(loaded.spec.services) == expected
    assert loaded.spec.router.kind == EXAMPLE_ROUTERS.get(example.name, "sglang-router")


def test_reference_remote_example_is_the_reference_deployment() -> None:
    spec = load_spec(REPO / "examples" / "reference-remote.toml").spec
    assert [spec.service(n).port for n in ("prefill", "decode", "router")] == [30000, 30002, 30001]
    assert spec.service("prefill").bootstrap_port == 8998
    assert all(spec.service(n).unit for n in spec.services)
    assert not spec.hosts["gpu"].is_local


def _local_example(tmp_path: Path, kind: str = "sglang-router") -> tuple[Path, list[int]]:
    """examples/local-sim.toml on free ports, with its state and env files under tmp_path; its
    router the ``kind`` given (the example names none: sglang-router)."""
    text = (REPO / "examples" / "local-sim.toml").read_text()
    if kind != "sglang-router":
        text = text.replace(
            "[services.router.router]\n", f'[services.router.router]\nkind = "{kind}"\n'
        )
    ports = free_ports(5)
    for old, new in zip(("31000", "31998", "31002", "31001", "31090"), ports, strict=True):
        text = text.replace(old, str(new))
    text = re.sub(r'state_dir = ".*"', 'state_dir = "state"', text)
    text = text.replace("health_check_interval_s = 2", "health_check_interval_s = 1")
    shutil.copytree(REPO / "examples" / "env", tmp_path / "env")
    for name in ("prefill.env", "decode.env"):
        path = tmp_path / "env" / name
        path.write_text(path.read_text().replace("TIME_SCALE=0.25", "TIME_SCALE=0.02"))
    spec = tmp_path / "servelab.toml"
    spec.write_text(text)
    return spec, ports


@pytest.mark.parametrize("kind", ROUTER_KINDS)
def test_local_example_up_status_restart_down(kind: str, tmp_path: Path) -> None:
    spec, ports = _local_example(tmp_path, kind)
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    try:
        up = run_cli("up", "-f", str(spec), "--json", env=env, timeout=100)
        assert up.returncode == 0, up.stderr
        assert [s["outcome"] for s in json.loads(up.stdout)["steps"]] == ["ok"] * 3
        assert load_spec(spec).spec.router.kind == kind
        status = run_cli("status", "-f", str(spec), env=env)
        assert status.returncode == 0, status.stderr
        assert "router" in status.stdout and "HTTP 200" in status.stdout
        restart = run_cli("restart", "decode", "-f", str(spec), "--json", env=env, timeout=100)
        assert restart.returncode == 0, restart.stdout + restart.stderr
        report = json.loads(restart.stdout)
        assert report["plan"] == ["decode", "router"] and report["verification"]["ok"]
        assert all(c["code"] and c["detail"] for c in report["verification"]["checks"])
    finally:
        down = run_cli("down", "-f", str(spec), env=env)
    assert down.returncode == 0, down.stderr
    assert "down: ok" in down.stdout
    assert not any(listening(port) for port in ports)
    status = run_cli("status", "-f", str(spec), "--json", env=env)
    assert status.returncode == 1
    assert [s["ready"] for s in json.loads(status.stdout)] == [False] * 3


def test_failed_up_exits_1_and_names_the_service(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    (tmp_path / "servelab.toml").write_text(
        'name = "t"\nstate_dir = "state"\n[services.web]\nrole = "generic"\n'
        f'url = "http://127.0.0.1:{port}"\nstart = "exit 7"\n'
    )
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    result = run_cli("up", env=env, cwd=tmp_path)
    assert result.returncode == 1
    assert "web: the start command exited with status 7" in result.stderr
    assert "logs/web.log" in result.stderr


def test_bad_spec_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[services.x]\nrole = "generic"\nurl = "nope"\nstart = "true"\n')
    result = run_cli("up", "-f", str(bad), env={"SERVELAB_LEDGER": os.devnull})
    assert result.returncode == 2
    assert "services.x.url" in result.stderr


def test_ctrl_c_during_up_stops_what_it_started(tmp_path: Path) -> None:
    good, slow = free_ports(2)
    server = f"exec {sys.executable} -m http.server {{port}} --bind 127.0.0.1"
    (tmp_path / "servelab.toml").write_text(
        'name = "t"\nstate_dir = "state"\n'
        f'[services.good]\nrole = "generic"\nurl = "http://127.0.0.1:{good}"\n'
        f"start = '{server.format(port=good)}'\nready_path = \"/\"\nstart_timeout_s = 0.5\n"
        f'[services.slow]\nrole = "generic"\nurl = "http://127.0.0.1:{slow}"\n'
        f"start = '{server.format(port=slow)}'\nready_path = \"/missing\"\n"
        'depends_on = ["good"]\nready_timeout_s = 60\n'
    )
    env = {**os.environ, "SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "servelab", "up"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        # a loaded machine takes many seconds to start a Python process: the bound is generous
        deadline = time.monotonic() + 120
        # slow started and listening (its readiness never comes): Ctrl-C lands while it starts
        while not ((tmp_path / "state" / "run" / "slow.json").exists() and listening(slow)):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:  # never leave it running (its pipes would be reported in a later test)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert live_procs_under(tmp_path) == []
    assert not listening(good) and not listening(slow)
