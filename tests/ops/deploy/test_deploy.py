"""up/down/status/restart for real: simulated workers, the real router, generic services,
a real loopback sshd. Every stack runs on free ports and is checked for orphans afterwards."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.deploy.outcomes import StepOutcome
from servelab.core.deploy.record import DeploymentRecord
from servelab.core.knobs.envfile import parse_envfile, parse_environ
from servelab.core.ledger.codec import encode
from servelab.errors import HealthTimeout, ServiceStartError
from servelab.io.hosts.host import LocalHost
from servelab.io.hosts.processes import read_pid_record
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.arguments import ENV_AT_LAUNCH
from servelab.ops.deploy import deploy
from servelab.report.deploy import render_restart
from tests.support import free_ports
from tests.support.processes import listening, live_procs_under
from tests.support.progress import lines
from tests.support.specs import PdPorts, write_pd_spec
from tests.support.sshd import SshdServer

PY = sys.executable
PINNED = {DEFAULT_KNOB: "512"}  # verification fails a restart with any other value


def _no_listeners(ports: list[int]) -> bool:
    return not any(listening(port) for port in ports)


def _load(tmp_path: Path, text: str) -> LoadedSpec:
    path = tmp_path / "servelab.toml"
    path.write_text(text)
    (tmp_path / "env").mkdir(exist_ok=True)
    return load_spec(path)


def _generic(name: str, port: int, **extra: object) -> str:
    lines = [f"[services.{name}]", 'role = "generic"', f'url = "http://127.0.0.1:{port}"']
    if "start" not in extra:
        # a foreground command: it is waited for until start_timeout_s, then readiness decides
        extra["start"] = f"exec {PY} -m http.server {port} --bind 127.0.0.1"
        extra.setdefault("start_timeout_s", 0.5)
    extra.setdefault("ready_path", "/")  # http.server has no /health
    extra.setdefault("ready_timeout_s", 20.0)
    for key, value in extra.items():
        lines.append(
            f"{key} = {value!r}".replace("'", '"')
            if not isinstance(value, str)
            else f"{key} = '{value}'"
        )
    return "\n".join(lines) + "\n"


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "ledger.db") as opened:
        yield opened


async def test_sim_stack_up_status_restart_rollback_down(tmp_path: Path, ledger: Ledger) -> None:
    ports = PdPorts.free(proxy=False)
    loaded = load_spec(write_pd_spec(tmp_path, time_scale=0.02, ports=ports, knobs=PINNED))
    messages: list[str] = []
    try:
        report = await deploy.up(loaded, progress=lines(messages), ledger=ledger)
        assert [s.outcome for s in report.steps] == [StepOutcome.OK] * 3, encode(report)
        assert [s.service for s in report.steps] == ["prefill", "decode", "router"]
        assert any("router: started pid" in m for m in messages)
        statuses = await deploy.status(loaded)
        assert all(s.ready and s.alive and s.pid_source == "pid record" for s in statuses)
        assert '"ready"' in statuses[2].readiness.body  # type: ignore[union-attr]
        again = await deploy.up(loaded)
        assert [s.outcome for s in again.steps] == [StepOutcome.ALREADY_UP] * 3
        decode = read_pid_record(loaded.state_dir, "decode")
        assert decode is not None
        live = parse_environ(Path(f"/proc/{decode.pid}/environ").read_bytes())
        assert live[DEFAULT_KNOB] == "512"

        # a knob edit (with its backup) that verification rejects -> rolled back and restarted
        env_path = tmp_path / "env" / "decode.env"
        backup = await LocalHost().write_file_atomic(
            str(env_path),
            parse_envfile(env_path.read_text()).set(DEFAULT_KNOB, "256").render().encode(),
        )
        assert backup is not None
        # the rollback puts back the file the running decode was started from (its launch copy)
        launched = read_pid_record(loaded.state_dir, "decode")
        assert launched is not None and isinstance(launched.extra.get(ENV_AT_LAUNCH), str)
        ran = launched.extra[ENV_AT_LAUNCH]
        assert Path(ran).read_bytes() == Path(backup).read_bytes()  # as before the edit
        restarted = await deploy.restart(loaded, ["decode"], rollback=True, ledger=ledger)
        assert restarted.plan == ["decode", "router"]
        assert [s.outcome for s in restarted.steps] == [StepOutcome.OK, StepOutcome.OK]
        assert restarted.verification is not None and not restarted.verification.ok
        assert restarted.rolled_back and restarted.rollback_from == {"decode": ran}
        assert [s.outcome for s in restarted.rollback_steps] == [StepOutcome.OK, StepOutcome.OK]
        assert not restarted.ok
        text = render_restart(restarted)
        assert f"rolled back env files: decode <- {ran}" in text
        assert "verification: FAILED" in text and text.rstrip().endswith("restart: FAILED")
        assert parse_envfile(env_path.read_text()).get(DEFAULT_KNOB) == "512"
        assert Path(restarted.backups["decode"]).read_text().count(f"{DEFAULT_KNOB}=256") == 1
        copy = Path(restarted.backups["decode"])  # the pre-restart copy: under the state dir
        assert copy.parent.parent == loaded.state_dir / "backups" / "decode"
        assert copy.parent.name.startswith("decode.env-")  # one folder per file
        assert copy.name.startswith("decode.env.pre-restart-")
        assert not list(env_path.parent.glob("*.pre-restart-*"))
        decode = read_pid_record(loaded.state_dir, "decode")
        assert decode is not None
        live = parse_environ(Path(f"/proc/{decode.pid}/environ").read_bytes())
        assert live[DEFAULT_KNOB] == "512"

        verified = await deploy.restart(loaded, ["router"], ledger=ledger)
        assert verified.ok and verified.verification and verified.verification.ok
    finally:
        stopped = await deploy.down(loaded, ledger=ledger)
    assert [s.service for s in stopped.steps] == ["router", "decode", "prefill"]
    assert live_procs_under(tmp_path) == []
    assert _no_listeners(ports.listened())
    assert [s.outcome for s in (await deploy.down(loaded)).steps] == ["not running"] * 3
    actions = [row.action for row in ledger.list(DeploymentRecord)]
    assert actions == ["up", "restart", "restart", "down"]


async def test_never_ready_names_service_probe_and_log(tmp_path: Path) -> None:
    good, bad = free_ports(2)
    text = (
        'name = "t"\nstate_dir = "state"\n'
        + _generic("good", good)
        + _generic("bad", bad, ready_path="/missing", ready_timeout_s=2.0, depends_on=["good"])
    )
    loaded = _load(tmp_path, text)
    started = time.monotonic()
    with pytest.raises(HealthTimeout) as info:
        await deploy.up(loaded)
    message = str(info.value)
    assert message.startswith("bad: not ready after 2.0s")
    assert "last probe: HTTP 404" in message
    assert f"{loaded.state_dir}/logs/bad.log" in message
    assert time.monotonic() - started < 15
    assert live_procs_under(tmp_path) == []
    assert _no_listeners([good, bad])
    assert read_pid_record(loaded.state_dir, "good") is None


async def test_process_exiting_fails_at_once_with_its_log(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    text = 'name = "t"\nstate_dir = "state"\n' + _generic(
        "dies", port, start="echo boom-from-service >&2; exit 3", ready_timeout_s=60.0
    )
    loaded = _load(tmp_path, text)
    started = time.monotonic()
    with pytest.raises(ServiceStartError) as info:
        await deploy.up(loaded)
    assert time.monotonic() - started < 10
    message = str(info.value)
    assert "dies: the start command exited with status 3" in message
    assert "boom-from-service" in message and "logs/dies.log" in message
    assert "last probe: " in message


async def test_start_command_timeout_but_healthy(tmp_path: Path) -> None:
    """The command still runs at start_timeout_s and the service is not ready yet: readiness
    decides. (Ready while the command runs, before the timeout, is a foreground service.)"""
    (port,) = free_ports(1)
    start = f'sh -c "sleep 2.5; {PY} -m http.server {port} --bind 127.0.0.1 & sleep 30"'
    text = 'name = "t"\nstate_dir = "state"\n' + _generic(
        "slowcmd", port, start=start, start_timeout_s=1.5, ready_timeout_s=20.0
    )
    loaded = _load(tmp_path, text)
    try:
        report = await deploy.up(loaded)
        assert report.steps[0].outcome == StepOutcome.TIMED_OUT_HEALTHY
        restarted = await deploy.restart(loaded, verify_after=False)
        step = restarted.steps[0]
        assert step.outcome == StepOutcome.TIMED_OUT_HEALTHY and step.ok
        assert encode(step)["evidence"]["command_timeout_s"] == 1.5
        assert encode(step)["evidence"]["readiness"]["status"] == 200
        assert encode(step)["evidence"]["command_exit"] is None
        assert restarted.ok
    finally:
        await deploy.down(loaded)
    assert live_procs_under(tmp_path) == []  # the `sleep 30` went with its group
    assert _no_listeners([port])


async def test_restart_co_restarts_dependents_only(tmp_path: Path) -> None:
    a, b, c = free_ports(3)
    text = (
        'name = "t"\nstate_dir = "state"\n'
        + _generic("a", a)
        + _generic("b", b, depends_on=["a"])
        + _generic("c", c)
    )
    loaded = _load(tmp_path, text)
    try:
        await deploy.up(loaded)
        before = {n: read_pid_record(loaded.state_dir, n) for n in "abc"}
        report = await deploy.restart(loaded, ["a"], verify_after=False)
        after = {n: read_pid_record(loaded.state_dir, n) for n in "abc"}
        assert report.plan == ["a", "b"] and report.ok
        assert before["a"] != after["a"] and before["b"] != after["b"]
        assert before["c"] == after["c"]
    finally:
        await deploy.down(loaded)
    assert live_procs_under(tmp_path) == []


async def test_cancel_during_up_stops_what_it_started(tmp_path: Path) -> None:
    good, slow = free_ports(2)
    text = (
        'name = "t"\nstate_dir = "state"\n'
        + _generic("good", good)
        + _generic("slow", slow, ready_path="/missing", ready_timeout_s=60.0, depends_on=["good"])
    )
    loaded = _load(tmp_path, text)
    messages: list[str] = []
    task = asyncio.create_task(deploy.up(loaded, progress=lines(messages)))
    deadline = time.monotonic() + 30
    # slow started and listening (its readiness never comes): the cancel lands while it starts
    while not (any(m.startswith("slow: started") for m in messages) and listening(slow)):
        assert time.monotonic() < deadline and not task.done(), messages
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert live_procs_under(tmp_path) == []
    assert _no_listeners([good, slow])


async def test_sim_stack_over_ssh(tmp_path: Path, sshd: SshdServer) -> None:
    ports = PdPorts.free(proxy=False)
    spec = write_pd_spec(
        tmp_path,
        time_scale=0.02,
        ports=ports,
        knobs=PINNED,
        host="remote",
        hosts_toml=sshd.host_toml("remote"),
        state_dir=str(tmp_path / "remote-state"),
        env_dir=str(tmp_path / "env"),
    )
    loaded = load_spec(spec)
    try:
        report = await deploy.up(loaded)
        assert report.ok and [s.outcome for s in report.steps] == [StepOutcome.OK] * 3
        statuses = await deploy.status(loaded)
        assert all(s.ready and s.host == "remote" for s in statuses)
        decode = read_pid_record(loaded.state_dir, "decode")
        assert decode is not None and decode.host == "remote"
        assert decode.log == f"{tmp_path}/remote-state/logs/decode.log"
        live = parse_environ(Path(f"/proc/{decode.pid}/environ").read_bytes())
        assert live[DEFAULT_KNOB] == "512"
        restarted = await deploy.restart(loaded, ["decode"], verify_after=False)
        assert restarted.ok and [s.outcome for s in restarted.steps] == [StepOutcome.OK] * 2
        assert read_pid_record(loaded.state_dir, "decode") != decode
        pids = [read_pid_record(loaded.state_dir, n) for n in ("prefill", "decode", "router")]
    finally:
        await deploy.down(loaded)
    assert _no_listeners(ports.listened())
    for record in pids:
        assert record is not None
        stat = Path(f"/proc/{record.pid}/stat")
        assert not stat.exists() or stat.read_text().rpartition(")")[2].split()[0] == "Z"
