"""``servelab init --ssh`` against a 1P1D on smg whose three processes are systemd units, in a
real systemd reached over a real sshd (:mod:`tests.support.systemd`): the spec it writes names each
unit, its ``EnvironmentFile=`` and the variable of it that ``ExecStart=`` expands (where the
decode's arguments live), and ``verify`` passes it unchanged (over SSH)."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.spec import parse_spec
from servelab.core.deploy.topology import service_argv
from tests.support import free_ports, run_cli
from tests.support.stack import wait_http
from tests.support.systemd import SystemdHost, start_systemd

_UNIT = """[Unit]
Description=servelab init test {name}
[Service]
EnvironmentFile={env}
ExecStart={exec_start}
StandardOutput=append:{log}
StandardError=append:{log}
"""


@pytest.fixture(scope="module")
def systemd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SystemdHost]:
    if sys.prefix.startswith("/tmp"):  # the namespace's /tmp is private: the venv is not there
        pytest.skip("the venv is under /tmp, which the private systemd does not see")
    host = start_systemd(tmp_path_factory.mktemp("systemd"), tmp_path_factory.getbasetemp())
    yield host
    host.stop()


def _reference(root: Path) -> tuple[str, dict[str, list[str]]]:
    """A 1P1D on smg (servelab's own argv for each service) on free ports: the router's URL and
    each service's argv."""
    prefill, boot, decode, router, metrics = free_ports(5)
    spec = parse_spec(f"""
[services.prefill]
role = "prefill"
url = "http://127.0.0.1:{prefill}"
start = "sim"
bootstrap_port = {boot}
[services.decode]
role = "decode"
url = "http://127.0.0.1:{decode}"
start = "sim"
depends_on = ["prefill"]
[services.router]
role = "router"
url = "http://127.0.0.1:{router}"
start = "router"
depends_on = ["prefill", "decode"]
router = {{ kind = "smg", prometheus_port = {metrics}, health_check_interval_s = 1 }}
""")
    argv = {name: service_argv(spec, name, sys.executable) or [] for name in spec.services}
    return spec.services["router"].url, argv


def _start_units(systemd: SystemdHost, root: Path) -> str:
    router_url, argv = _reference(root)
    env = {"prefill": "SERVELAB_SIM_TIME_SCALE=0.02\n",
           "decode": "SERVELAB_SIM_TIME_SCALE=0.02\nSGLANG_ARGS=--enable-cache-report\n",
           "router": "RUST_LOG=warn\n"}  # fmt: skip
    for name in ("prefill", "decode", "router"):
        (root / f"{name}.env").write_text(env[name])
        words = [*argv[name], "$SGLANG_ARGS"] if name == "decode" else argv[name]
        exec_start = shlex.join(words).replace("'$SGLANG_ARGS'", "$SGLANG_ARGS")
        text = _UNIT.format(name=name, env=root / f"{name}.env", log=root / f"{name}.log",
                            exec_start=exec_start)  # fmt: skip
        systemd.add_unit(f"init-{name}.service", text)
        started = systemd.systemctl("start", f"init-{name}.service")
        assert started.returncode == 0, started.stderr
    wait_http(router_url + "/readiness", 60)
    return router_url


@pytest.mark.timeout(240)
def test_init_reads_the_units_and_verify_passes(systemd: SystemdHost, tmp_path: Path) -> None:
    router_url = _start_units(systemd, tmp_path)
    ssh = systemd.sshd
    out = tmp_path / "init.toml"
    done = run_cli("init", "--router", router_url, "--ssh", f"{ssh.ssh}:{ssh.port}",
                   "--identity-file", str(ssh.identity_file), "-o", str(out), "--json",
                   cwd=tmp_path, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    doc = json.loads(done.stdout)
    assert doc["router_kind"] == "smg"
    gaps = {(g["service"], g["code"]) for g in doc["gaps"]}
    assert not {code for _, code in gaps} & {"no_process", "argv_rewritten", "host_not_reached"}
    spec = parse_spec(out.read_text())
    for name in ("prefill", "decode", "router"):
        svc = spec.services[name]
        assert svc.unit == f"init-{name}.service" and svc.host != "local", svc
        assert svc.env_file == str(tmp_path / f"{name}.env")
        assert svc.start == f"sudo systemctl restart init-{name}.service"
    assert spec.services["decode"].args_env == "SGLANG_ARGS"  # where the arguments live
    assert spec.services["prefill"].args_env is None
    assert "# ExecStart: " in out.read_text() and "$SGLANG_ARGS" in out.read_text()
    check = run_cli("verify", "-f", str(out), "--json", "--ledger", str(tmp_path / "l.db"),
                    cwd=tmp_path, timeout=120)  # fmt: skip
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr
