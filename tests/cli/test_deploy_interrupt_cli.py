"""`servelab up|restart` interrupted (SIGINT, as Ctrl-C) or failing with markup in a service's
log, as real processes: what is down is said and recorded, nothing is left running."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

from servelab.core.deploy.record import DeploymentRecord
from servelab.io.ledger.ledger import Ledger
from tests.support import free_ports, run_cli
from tests.support.generic import HTTP_SERVER, generic_service, servelab_process, text_or_empty
from tests.support.processes import listening, live_procs_under


def _mine() -> int:
    """A port of this file's newer tests' range (21000-21999)."""
    return random.randint(21000, 21999)


def _interrupt_when(proc: subprocess.Popen[bytes], started: Path) -> str:
    """SIGINT once ``started`` (a pid record) exists; the process's stderr. The process is
    killed if that never happens (never left running: its pipes would be reported later)."""
    try:
        deadline = time.monotonic() + 120  # a loaded machine starts Python slowly
        while not started.exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    return err.decode()


def test_ctrl_c_during_up_names_every_service_it_stopped(tmp_path: Path) -> None:
    good, slow = free_ports(2)
    (tmp_path / "servelab.toml").write_text(
        'name = "t"\nstate_dir = "state"\n'
        + generic_service("good", good, 'ready_path = "/"\n')
        + generic_service("slow", slow, 'ready_path = "/missing"\ndepends_on = ["good"]\n')
    )
    err = _interrupt_when(
        servelab_process(tmp_path, "up"), tmp_path / "state" / "run" / "slow.json"
    )
    assert "up failed: ;" not in err
    assert "up interrupted; stopped what this run started: slow, good" in err
    assert live_procs_under(tmp_path) == []
    assert not listening(good) and not listening(slow)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        row = ledger.list(DeploymentRecord)[-1]
    assert row.action == "up" and row.detail["stopped"] == ["slow", "good"]


def test_ctrl_c_during_restart_says_what_is_down_and_how_to_bring_it_back(
    tmp_path: Path,
) -> None:
    a, b = free_ports(2)
    spec = tmp_path / "servelab.toml"
    spec.write_text(
        'name = "t"\nstate_dir = "state"\n'
        + generic_service("a", a, 'ready_path = "/ready-a"\n')
        + generic_service("b", b, 'ready_path = "/"\ndepends_on = ["a"]\n')
    )
    marker = tmp_path / "ready-a"
    marker.write_text("ok")
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    try:
        assert run_cli("up", "-f", str(spec), env=env).returncode == 0
        marker.unlink()  # a's next start never gets ready
        record = tmp_path / "state" / "run" / "a.json"
        before = record.read_text()
        proc = servelab_process(tmp_path, "restart", "a", "-f", str(spec), "--no-verify")
        deadline = time.monotonic() + 120
        while text_or_empty(record) in ("", before):  # a's new launch
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        err = _interrupt_when(proc, record)
        assert f"restart interrupted; down: a, b; bring them back with: servelab up -f {spec}" in (
            " ".join(err.split())
        )
        with Ledger.open(tmp_path / "ledger.db") as ledger:
            row = ledger.list(DeploymentRecord)[-1]
        assert row.action == "restart" and row.detail["down"] == ["a", "b"]
        assert row.detail["recovery"] == f"servelab up -f {spec}"
        assert not listening(a) and not listening(b)
        marker.write_text("ok")
        assert run_cli("up", "-f", str(spec), env=env).returncode == 0  # the command said works
        assert listening(a) and listening(b)
    finally:
        run_cli("down", "-f", str(spec), env=env)
    assert live_procs_under(tmp_path) == []


def test_ctrl_c_before_anything_stopped_names_nothing_down(tmp_path: Path) -> None:
    """The twenty-fourth pass: ``restart decode`` interrupted ~0.8 s in, before anything was
    stopped, said "down: router; bring them back with …" while the router still served. Here
    b's stop command (b: a's dependent, stopped first) holds until the signal: nothing stopped,
    nothing is said down, and both still answer."""
    a, b = free_ports(2, draw=_mine)
    hold, stopping = tmp_path / "hold", tmp_path / "stopping"
    stop = f"if [ -e {hold} ]; then touch {stopping}; sleep 60; fi"
    spec = tmp_path / "servelab.toml"
    spec.write_text(
        'name = "t"\nstate_dir = "state"\n'
        + generic_service("a", a, 'ready_path = "/"\n')
        + generic_service("b", b, f'ready_path = "/"\ndepends_on = ["a"]\nstop = "{stop}"\n')
    )
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    try:
        assert run_cli("up", "-f", str(spec), env=env).returncode == 0
        hold.write_text("")
        proc = servelab_process(tmp_path, "restart", "a", "-f", str(spec), "--no-verify")
        err = _interrupt_when(proc, stopping)
        said = " ".join(err.split())
        assert "restart interrupted; no service is down" in said, err
        assert "down: b" not in said and "bring them back" not in said, err
        assert listening(a) and listening(b)
        with Ledger.open(tmp_path / "ledger.db") as ledger:
            row = ledger.list(DeploymentRecord)[-1]
        assert row.action == "restart" and row.detail["down"] == []
    finally:
        hold.unlink(missing_ok=True)
        run_cli("down", "-f", str(spec), env=env)
    assert live_procs_under(tmp_path) == []


def test_up_whose_restart_behind_fails_says_the_service_serving_before_is_down(
    tmp_path: Path,
) -> None:
    """The twenty-fourth pass: ``up`` restarted the router (serving) behind the decode it started,
    the router's start failed, and ``up`` stopped both: the router, serving before the run, was
    left down, said only as "stopping what this run started". It is said plainly."""
    a, b = free_ports(2, draw=_mine)
    hold = tmp_path / "hold"
    b_start = f"if [ -e {hold} ]; then exit 3; fi; " + HTTP_SERVER.format(port=b)
    spec = tmp_path / "servelab.toml"
    spec.write_text(
        'name = "t"\nstate_dir = "state"\n'
        + generic_service("a", a, 'ready_path = "/"\n')
        + f'[services.b]\nrole = "generic"\nurl = "http://127.0.0.1:{b}"\n'
        + f'start = \'{b_start}\'\nready_path = "/"\ndepends_on = ["a"]\n'
    )
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    try:
        assert run_cli("up", "-f", str(spec), env=env).returncode == 0
        os.killpg(json.loads((tmp_path / "state" / "run" / "a.json").read_text())["pgid"], 9)
        deadline = time.monotonic() + 60
        while listening(a):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        hold.write_text("")
        done = run_cli("up", "-f", str(spec), env=env)
        assert done.returncode == 1, done.stdout + done.stderr
        said = " ".join(done.stderr.split())
        assert "b: restarting (a was started behind it)" in said, done.stderr
        assert (
            f"b was serving before this run and is now down; bring it back with: servelab up -f "
            f"{spec}" in said
        ), done.stderr
        assert not listening(b)
    finally:
        hold.unlink(missing_ok=True)
        run_cli("down", "-f", str(spec), env=env)
    assert live_procs_under(tmp_path) == []


def test_markup_in_a_service_log_is_printed_as_text_and_up_cleans_up(tmp_path: Path) -> None:
    good, bad = free_ports(2)
    (tmp_path / "servelab.toml").write_text(
        'name = "t"\nstate_dir = "state"\n'
        + generic_service("good", good, 'ready_path = "/"\n')
        + f'[services.bad]\nrole = "generic"\nurl = "http://127.0.0.1:{bad}"\n'
        'start = \'echo "[/x] [bold]boom" >&2; exit 3\'\ndepends_on = ["good"]\n'
    )
    result = run_cli("up", env={"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "[/x] [bold]boom" in result.stderr
    assert "MarkupError" not in result.stderr and "Traceback" not in result.stderr
    assert live_procs_under(tmp_path) == []
    assert not listening(good) and not listening(bad)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        row = ledger.list(DeploymentRecord)[-1]
    assert row.action == "up" and row.detail["ok"] is False
    assert row.detail["stopped"] == ["bad", "good"]


def test_ctrl_c_during_restart_json_names_what_is_down_and_how_to_bring_it_back(
    tmp_path: Path,
) -> None:
    a, b = free_ports(2)
    spec = tmp_path / "servelab.toml"
    spec.write_text(
        'name = "t"\nstate_dir = "state"\n'
        + generic_service("a", a, 'ready_path = "/ready-a"\n')
        + generic_service("b", b, 'ready_path = "/"\ndepends_on = ["a"]\n')
    )
    marker = tmp_path / "ready-a"
    marker.write_text("ok")
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    try:
        assert run_cli("up", "-f", str(spec), env=env).returncode == 0
        marker.unlink()  # a's next start never gets ready
        record = tmp_path / "state" / "run" / "a.json"
        before = record.read_text()
        proc = servelab_process(tmp_path, "restart", "a", "-f", str(spec), "--no-verify", "--json")
        deadline = time.monotonic() + 120
        while text_or_empty(record) in ("", before):  # a's new launch
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        doc = json.loads(out)
        assert (doc["ok"], doc["exit_code"], doc["error"]) == (False, 130, "interrupted")
        assert (doc["down"], doc["recovery"]) == (["a", "b"], f"servelab up -f {spec}")
        assert doc["report"]["interrupted"] is True and doc["report"]["down"] == ["a", "b"]
        assert "restart interrupted; down: a, b" in " ".join(err.decode().split())
    finally:
        run_cli("down", "-f", str(spec), env=env)
    assert live_procs_under(tmp_path) == []
