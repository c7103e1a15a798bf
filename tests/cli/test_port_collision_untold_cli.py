"""``up`` over a ready router it did not start and cannot tell whose it is (issue 38, eighteenth
pass): the real sglang-router started with no worker (its workers registered later with
``POST /workers``, as a dynamic deployment does) lists none of this spec's and no other's: no proof
of another deployment, so ``up`` is not refused; and a router whose worker list cannot be read
(a process answering its readiness path but no ``/workers``) is no longer said "already up": each
is a warning that whose it is cannot be told. Real router binary, real processes."""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.generic import servelab_in
from tests.support.processes import alive, http_server, live_procs_under
from tests.support.specs import PdEnv, PdPorts, pd_spec_toml
from tests.support.stack import start_process, stop_process, wait_http

#: The router's readiness path in these specs: the real router's ``/readiness`` is 503 until it
#: lists a healthy worker of each role, so an empty router is not found ready there; a spec that
#: probes ``/health`` (200 whatever it lists) finds it ready, and asks whose it is.
_HEALTH = 'ready_path = "/health"\n'


def _spec(folder: Path, ports: PdPorts) -> Path:
    folder.mkdir()
    PdEnv().write(folder / "env")
    text = pd_spec_toml(ports, name="zeta", env_dir=str(folder / "env"))
    head = 'depends_on = ["prefill", "decode"]\n'
    assert head in text
    spec = folder / "spec.toml"
    spec.write_text(text.replace(head, head + _HEALTH))
    return spec


@pytest.fixture
def empty_router(tmp_path: Path) -> Iterator[tuple[PdPorts, int]]:
    """The real sglang-router in PD mode with no worker, on a free port (and its pid)."""
    ports = PdPorts.free(proxy=False)
    argv = [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1",
            "--port", str(ports.router), "--pd-disaggregation", "--policy", "round_robin",
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(ports.metrics),
            "--health-check-interval-secs", "1"]  # fmt: skip
    proc = start_process(argv, tmp_path / "router.log")
    try:
        wait_http(f"http://127.0.0.1:{ports.router}/health", 60, proc)
        yield ports, proc.pid
    finally:
        stop_process(proc)


def _listed(port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/workers", timeout=5) as answer:
        return [w["url"] for w in json.loads(answer.read())["workers"]]


@pytest.mark.timeout(300)
def test_up_beside_an_empty_router_is_not_refused_and_says_it_cannot_tell(
    tmp_path: Path, empty_router: tuple[PdPorts, int]
) -> None:
    ports, pid = empty_router
    assert _listed(ports.router) == []  # the real router, started with no worker
    spec = _spec(tmp_path / "zeta", ports)
    code, out, err = servelab_in(tmp_path, "up", "-f", str(spec))
    said = " ".join((out + err).split())
    assert code == 0, said  # was: refused, exit 1, its workers stopped
    assert "does not list" not in said, said
    assert (
        f"router: WARNING: pid {pid} holds its port, a router not started by this deployment "
        "that lists no worker but this spec's, and not prefill, decode" in said
    ), said
    assert "whose router it is cannot be told; left running as it is, not adopted" in said, said
    assert "router: already up" not in said, said
    state = tmp_path / "zeta" / "state" / "run"
    assert {p.stem for p in state.glob("*.json")} == {"prefill", "decode"}, said
    assert alive(pid)
    # the workers register with it later, as a dynamic deployment's do: it then serves them
    for role, port, extra in (("prefill", ports.prefill, {"bootstrap_port": ports.bootstrap}),
                              ("decode", ports.decode, {})):  # fmt: skip
        body = json.dumps({"url": f"http://127.0.0.1:{port}", "worker_type": role, **extra})
        request = urllib.request.Request(
            f"http://127.0.0.1:{ports.router}/workers", body.encode(), method="POST",
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        urllib.request.urlopen(request, timeout=5).close()
    wait_http(f"http://127.0.0.1:{ports.router}/readiness", 60)
    _, out, err = servelab_in(tmp_path, "down", "-f", str(spec))  # cannot tell it: not stopped
    assert f"held by pid {pid}" in out + err and "not stopped" in out + err, out + err
    assert alive(pid)
    assert live_procs_under(tmp_path / "zeta") == []


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "workers",
    [None, b"\xef\xbb\xbf\xff\x00" * 4096, b'{"workers": [' + b"1e308," * 100_000 + b"0]}"],
    ids=["404", "binary-with-bom", "huge-not-a-list-of-workers"],
)
def test_a_router_whose_worker_list_cannot_be_read_is_not_said_already_up(
    tmp_path: Path, workers: bytes | None
) -> None:
    served = tmp_path / "served"
    served.mkdir()
    (served / "health").write_text("OK")  # GET /health 200; GET /workers 404, or these bytes
    if workers is not None:
        (served / "workers").write_bytes(workers)
    with http_server({}, cwd=served) as (port, proc):
        ports = replace(PdPorts.free(proxy=False), router=port)
        spec = _spec(tmp_path / "zeta", ports)
        code, out, err = servelab_in(tmp_path, "up", "-f", str(spec))
        said = " ".join((out + err).split())
        assert code == 0, said
        assert (
            f"router: WARNING: pid {proc.pid} holds its port, a router not started by this "
            "deployment whose worker list cannot be read: whose router it is cannot be told" in said
        ), said
        assert "router: already up" not in said, said
        assert proc.poll() is None
        servelab_in(tmp_path, "down", "-f", str(spec))
        assert proc.poll() is None  # not this deployment's to stop
    assert live_procs_under(tmp_path / "zeta") == []
