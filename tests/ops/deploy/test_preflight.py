"""The pre-flight of ``up`` and ``restart`` for real: env files parse, ports are free, the router
module is importable, all before the first service starts; and a bad env line is never echoed."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.outcomes import StepOutcome
from servelab.core.deploy.record import DeploymentRecord
from servelab.errors import KnobError, ServelabError, ServiceStartError
from servelab.io.hosts.processes import read_pid_record
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.deploy import deploy
from tests.support import free_ports, run_cli
from tests.support.processes import listening, live_procs_under
from tests.support.progress import lines
from tests.support.servers import answering_app, served
from tests.support.specs import PdPorts, write_pd_spec

PY = sys.executable
LEAK = "hf_abc123leak"


def _generic(name: str, port: int, *, env: bool = True, depends: str = "") -> str:
    text = (
        f'[services.{name}]\nrole = "generic"\nurl = "http://127.0.0.1:{port}"\n'
        f"start = 'exec {PY} -m http.server {port} --bind 127.0.0.1'\n"
        'ready_path = "/"\nstart_timeout_s = 0.5\nready_timeout_s = 20.0\n'
    )
    if env:
        text += f'env_file = "env/{name}.env"\n'
    if depends:
        text += f'depends_on = ["{depends}"]\n'
    return text


def _two_services(tmp_path: Path) -> tuple[LoadedSpec, list[int]]:
    """``first`` and ``second`` (depends on first), each with an env file that parses."""
    ports = free_ports(2)
    text = 'name = "t"\nstate_dir = "state"\n'
    text += _generic("first", ports[0]) + _generic("second", ports[1], depends="first")
    (tmp_path / "env").mkdir()
    for name in ("first", "second"):
        (tmp_path / "env" / f"{name}.env").write_text("A=1\n")
    (tmp_path / "servelab.toml").write_text(text)
    return load_spec(tmp_path / "servelab.toml"), ports


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "ledger.db") as opened:
        yield opened


def _ledger_text(ledger: Ledger) -> str:
    return json.dumps(ledger.export(), default=str)


def _nothing_started(loaded: LoadedSpec, tmp_path: Path, ports: list[int]) -> None:
    assert all(read_pid_record(loaded.state_dir, n) is None for n in loaded.spec.services)
    assert not (loaded.state_dir / "logs").exists()
    assert live_procs_under(tmp_path) == []
    assert not any(listening(port) for port in ports)


async def test_up_with_a_malformed_env_line_hides_it(tmp_path: Path, ledger: Ledger) -> None:
    loaded, ports = _two_services(tmp_path)
    (tmp_path / "env" / "second.env").write_text(f"# second\nA=1\nHF_TOKEN {LEAK}\n")
    with pytest.raises(KnobError) as info:
        await deploy.up(loaded, ledger=ledger)
    message = str(info.value)
    assert LEAK not in message
    assert "second" in message and "second.env:3" in message
    assert LEAK not in _ledger_text(ledger)
    _nothing_started(loaded, tmp_path, ports)


async def test_restart_with_a_malformed_env_line_hides_it_and_stops_nothing(
    tmp_path: Path, ledger: Ledger
) -> None:
    loaded, ports = _two_services(tmp_path)
    try:
        await deploy.up(loaded, ledger=ledger)
        before = {n: read_pid_record(loaded.state_dir, n) for n in ("first", "second")}
        (tmp_path / "env" / "second.env").write_text(f"A=1\nHF_TOKEN {LEAK}\n")
        with pytest.raises(KnobError) as info:
            await deploy.restart(loaded, ["first"], ledger=ledger, verify_after=False)
        assert LEAK not in str(info.value) and "second.env:2" in str(info.value)
        assert LEAK not in _ledger_text(ledger)
        # nothing was stopped: the pre-flight ran before the first stop
        assert {n: read_pid_record(loaded.state_dir, n) for n in before} == before
        assert all(listening(port) for port in ports)
    finally:
        await deploy.down(loaded)
    assert live_procs_under(tmp_path) == []


async def test_a_missing_env_file_of_a_later_service_starts_nothing(
    tmp_path: Path, ledger: Ledger
) -> None:
    loaded, ports = _two_services(tmp_path)
    (tmp_path / "env" / "second.env").unlink()
    with pytest.raises(ServiceStartError) as info:
        await deploy.up(loaded, ledger=ledger)
    assert str(info.value).startswith("second: ")
    assert "second.env" in str(info.value)
    _nothing_started(loaded, tmp_path, ports)
    rows = ledger.list(DeploymentRecord)
    assert rows and rows[-1].detail["ok"] is False
    # the refusal's stored shape, key for key (a typed detail since: ``PreflightFailed``)
    assert rows[-1].detail == {
        "ok": False,
        "error": str(info.value),
        "preflight": True,
        "steps": [],
    }


async def test_a_taken_port_of_a_later_service_starts_nothing(
    tmp_path: Path, ledger: Ledger
) -> None:
    loaded, ports = _two_services(tmp_path)
    # the squatter answers, not ready: a silent listener held the readiness probe for its 5 s
    async with served(answering_app(503, "busy", "text/plain"), ports[1]):
        said: list[str] = []
        with pytest.raises(ServiceStartError) as info:
            await deploy.up(loaded, ledger=ledger, progress=lines(said))
        message = str(info.value)
        assert message.startswith("second: ")
        assert f"port {ports[1]}" in message
        assert not any("started" in line for line in said), said
        assert read_pid_record(loaded.state_dir, "first") is None
        assert not (loaded.state_dir / "logs").exists()
        assert not listening(ports[0])
    assert live_procs_under(tmp_path) == []


async def test_a_taken_bootstrap_port_is_found_before_anything_starts(
    tmp_path: Path, ledger: Ledger
) -> None:
    loaded, ports = _two_services(tmp_path)
    (bootstrap,) = free_ports(1)
    text = (tmp_path / "servelab.toml").read_text()
    text = text.replace('env_file = "env/second.env"\n', f"bootstrap_port = {bootstrap}\n", 1)
    (tmp_path / "servelab.toml").write_text(text)
    loaded = load_spec(tmp_path / "servelab.toml")
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", bootstrap))
        squatter.listen()
        with pytest.raises(ServiceStartError) as info:
            await deploy.up(loaded, ledger=ledger)
        assert f"port {bootstrap}" in str(info.value)
    _nothing_started(loaded, tmp_path, ports)


async def test_restart_accepts_ports_held_by_the_services_themselves(
    tmp_path: Path, ledger: Ledger
) -> None:
    loaded, _ports = _two_services(tmp_path)
    try:
        await deploy.up(loaded, ledger=ledger)
        again = await deploy.up(loaded, ledger=ledger)
        assert [s.outcome for s in again.steps] == [StepOutcome.ALREADY_UP] * 2
        report = await deploy.restart(loaded, ledger=ledger, verify_after=False)
        assert report.ok
    finally:
        await deploy.down(loaded)
    assert live_procs_under(tmp_path) == []


def _shadow_router(root: Path) -> Path:
    """A directory that, first on PYTHONPATH, makes ``sglang_router`` fail to import."""
    package = root / "shadow" / "sglang_router"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    return package.parent


def test_up_without_the_router_module_names_the_package_and_starts_nothing(
    tmp_path: Path,
) -> None:
    ports = free_ports(5)
    spec = write_pd_spec(tmp_path, ports=PdPorts(*ports, 0))
    env = {
        "PYTHONPATH": str(_shadow_router(tmp_path)),
        "SERVELAB_LEDGER": str(tmp_path / "ledger.db"),
    }
    result = run_cli("up", "-f", str(spec), env=env, timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if "sglang-router" in line]
    assert lines and "router" in lines[0] and "pip install" in lines[0]
    assert "prefill: started" not in result.stdout + result.stderr
    assert not (tmp_path / "state" / "logs").exists()
    assert live_procs_under(tmp_path) == []
    assert not any(listening(port) for port in ports)


def test_public_errors_are_servelab_errors() -> None:
    assert issubclass(KnobError, ServelabError) and issubclass(ServiceStartError, ServelabError)
