"""``servelab init`` against a running 2P2D on each router kind: smg 1.13 and sglang-router 0.3.2
(``examples/local-2p2d*.toml`` on free ports) and vllm-router 0.1.17 with the vLLM simulator. The
spec it writes, read from the router, the workers and their processes, passes ``verify``
unchanged; what it could not find (the router's rewritten argv, the environment) is said."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.spec import DeploymentSpec, parse_spec
from servelab.io.specfile import LoadedSpec, load_spec
from tests.support import free_ports, run_cli
from tests.support.deployed import deployed
from tests.support.xpyd import write_2p2d_spec

KINDS = ("smg", "sglang-router", "vllm-router")


def write_vllm_2p2d(root: Path) -> Path:
    """The 2P2D example on the vLLM simulator and vllm-router, on free ports; the workers serve
    ``/server_info`` (``VLLM_SERVER_DEV_MODE=1``, as examples/local-vllm.toml)."""
    p1, b1, p2, b2, d1, d2, router, metrics = free_ports(8)
    workers = [("prefill-1", "prefill", p1, b1), ("prefill-2", "prefill", p2, b2),
               ("decode-1", "decode", d1, None), ("decode-2", "decode", d2, None)]  # fmt: skip
    lines = ['name = "vllm-2p2d"', 'engine = "vllm"', 'state_dir = "state"', "", "[hosts.local]"]
    for name, role, port, boot in workers:
        lines += ["", f"[services.{name}]", f'role = "{role}"', f'url = "http://127.0.0.1:{port}"',
                  'start = "sim"', 'env_file = "env/vllm.env"', "ready_timeout_s = 60"]  # fmt: skip
        lines += (
            [f"bootstrap_port = {boot}"] if boot else ['depends_on = ["prefill-1", "prefill-2"]']
        )
    lines += ["", "[services.router]", 'role = "router"', f'url = "http://127.0.0.1:{router}"',
              'start = "router"', "ready_timeout_s = 90",
              'depends_on = ["prefill-1", "prefill-2", "decode-1", "decode-2"]', "",
              "[services.router.router]", f"prometheus_port = {metrics}",
              "health_check_interval_s = 1"]  # fmt: skip
    (root / "env").mkdir()
    (root / "env" / "vllm.env").write_text("SERVELAB_SIM_TIME_SCALE=0.02\nVLLM_SERVER_DEV_MODE=1\n")
    spec = root / "servelab.toml"
    spec.write_text("\n".join(lines) + "\n")
    return spec


def _write(root: Path, kind: str) -> Path:
    if kind == "vllm-router":
        return write_vllm_2p2d(root)
    return write_2p2d_spec(root, router=kind)[0]


def _workers(spec: DeploymentSpec, *, with_boot: bool) -> set[tuple[str, str, int | None]]:
    return {(v.url, v.role, v.bootstrap_port if with_boot else None)
            for v in spec.services.values() if v.role in ("prefill", "decode")}  # fmt: skip


@pytest.fixture(scope="module", params=KINDS)
def running(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LoadedSpec]:
    loaded = load_spec(_write(tmp_path_factory.mktemp(f"init-{request.param}"), request.param))
    with deployed(loaded):
        yield loaded


@pytest.mark.timeout(300)
def test_init_writes_a_spec_that_verify_passes_unchanged(
    running: LoadedSpec, tmp_path: Path
) -> None:
    spec = running.spec
    router = spec.services["router"]
    done = run_cli("init", "--router", router.url, "-o", str(tmp_path / "init.toml"), "--json",
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    doc = json.loads(done.stdout)
    assert doc["router_kind"] == spec.router.kind and doc["engine"] == spec.engine
    assert doc["model"] == "servelab-sim"
    text = (tmp_path / "init.toml").read_text()
    written = parse_spec(text)

    # the workers as the router lists them: URLs, roles, bootstrap ports (vllm-router lists none:
    # the NIXL side channel is the engine's, and init says it did not find it)
    vllm = spec.engine == "vllm"
    assert _workers(written, with_boot=not vllm) == _workers(spec, with_boot=not vllm)
    gaps = {(g["service"], g["code"]) for g in doc["gaps"]}
    assert (("prefill-1", "no_bootstrap_port") in gaps) is vllm
    assert written.router.kind == spec.router.kind
    # each worker's own command line, read from its process; the router's argv is rewritten
    for name in ("prefill-1", "prefill-2", "decode-1", "decode-2"):
        assert " -m servelab sim " in written.services[name].start, written.services[name]
    assert ("router", "argv_rewritten") in gaps and ("router", "router_start_guessed") in gaps
    assert written.services["router"].start == "router"
    assert written.services["router"].router is not None
    assert written.services["router"].router.prometheus_port == router.router.prometheus_port  # type: ignore[union-attr]
    assert "its process rewrote its command line" in text  # said in the spec too
    check = run_cli("verify", "-f", str(tmp_path / "init.toml"), "--json",
                    "--ledger", str(tmp_path / "ledger.db"), cwd=tmp_path)  # fmt: skip
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr
    assert json.loads(check.stdout)["ok"] is True
    again = run_cli("init", "--router", router.url, "-o", str(tmp_path / "init.toml"), cwd=tmp_path)
    assert again.returncode == 2 and "--force" in again.stderr  # never overwritten silently
    assert (tmp_path / "init.toml").read_text() == text


def test_init_without_a_router_says_which_url(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    done = run_cli("init", "--router", f"http://127.0.0.1:{port}", "-o", "-", cwd=tmp_path)
    assert done.returncode == 1
    assert re.search(rf"127\.0\.0\.1:{port}/workers", done.stderr), done.stderr
    assert not list(tmp_path.iterdir())  # nothing written
