"""A prefill that listens for the KV bootstrap on another port than the spec's (issue 38, the
ninth hostile pass): the router registers the spec's port and each decode fetches the KV there,
so every hand-off waits until the e2e deadline and verify said only "run deadline passed". Its
health check now compares the port the prefill reports (SGLang's ``/server_info``
``disaggregation_bootstrap_port``) with the spec's. A real simulated prefill on free ports."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from servelab.core.verify.checks import CheckCode
from servelab.core.verify.health import HealthProbe
from servelab.io.specfile import load_spec
from servelab.ops.verify.verify import verify
from servelab.report.verify import check_detail
from tests.support import free_ports
from tests.support.specs import PdPorts, pd_spec_toml
from tests.support.stack import start_process, stop_process, wait_http


@contextmanager
def _prefill(tmp_path: Path, port: int, bootstrap: int) -> Iterator[None]:
    argv = [sys.executable, "-m", "servelab", "sim", "prefill", "--port", str(port),
            "--disaggregation-bootstrap-port", str(bootstrap)]  # fmt: skip
    proc = start_process(argv, tmp_path / "prefill.log", None)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", 60, proc)
        yield
    finally:
        stop_process(proc)


@pytest.mark.timeout(120)
async def test_a_prefill_listening_on_another_bootstrap_port_fails_its_health(
    tmp_path: Path,
) -> None:
    ports = PdPorts.free(proxy=False)
    (elsewhere,) = free_ports(1)
    spec_path = tmp_path / "servelab.toml"
    spec_path.write_text(pd_spec_toml(ports, env_dir=None, knobs=(), router_kind="smg"))
    spec = load_spec(spec_path)
    with _prefill(tmp_path, ports.prefill, elsewhere):
        wrong = await verify(spec, ["prefill"], layers=("health",))
    (check,) = wrong.checks
    assert check.code is CheckCode.HEALTH_BOOTSTRAP_MISMATCH and not check.ok
    assert isinstance(check.data, HealthProbe)
    assert (check.data.listening_bootstrap_port, check.data.spec_bootstrap_port) == (
        elsewhere,
        ports.bootstrap,
    )
    said = check_detail(check)
    assert f"listens for the KV bootstrap on port {elsewhere}" in said, said
    assert f"while the spec says {ports.bootstrap}" in said
    with _prefill(tmp_path, ports.prefill, ports.bootstrap):
        right = await verify(spec, ["prefill"], layers=("health",))
    (check,) = right.checks
    assert check.code is CheckCode.HEALTH_WORKER_READY and check.ok
