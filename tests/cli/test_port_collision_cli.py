"""``up`` of a spec whose port is another live deployment's (issue 38, sixteenth pass H1): zeta,
its own state folder, points its router port (or a worker's port) at beta's. ``up -f zeta`` fails
naming the pid and port, never "already up" and ok; beta is left running as it was; what zeta
started is stopped. Real routers, real processes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support import free_ports
from tests.support.generic import servelab_in
from tests.support.processes import alive, live_procs_under
from tests.support.specs import PdEnv, PdPorts, pd_spec_toml

_SERVICES = ("prefill", "decode", "router")


def _pids(state: Path) -> dict[str, int]:
    return {s: int(json.loads((state / "run" / f"{s}.json").read_text())["pid"]) for s in _SERVICES}


def _write(folder: Path, name: str, ports: PdPorts) -> Path:
    """``folder/spec.toml`` (deployment ``name``, state folder ``folder/state``) and env files."""
    folder.mkdir()
    PdEnv().write(folder / "env")
    spec = folder / "spec.toml"
    spec.write_text(pd_spec_toml(ports, name=name, env_dir=str(folder / "env")))
    return spec


@pytest.fixture
def beta(tmp_path: Path) -> Iterator[tuple[Path, PdPorts, dict[str, int]]]:
    """Deployment beta up (its own folder), its ports and pids."""
    ports = PdPorts.free(proxy=False)
    spec = _write(tmp_path / "beta", "beta", ports)
    code, _, err = servelab_in(tmp_path, "up", "-f", str(spec))
    assert code == 0, err
    try:
        yield tmp_path, ports, _pids(tmp_path / "beta" / "state")
    finally:
        servelab_in(tmp_path, "down", "-f", str(spec))
    assert live_procs_under(tmp_path) == []


def _zeta(root: Path, ports: PdPorts) -> Path:
    return _write(root / "zeta", "zeta", ports)


def _up_zeta_fails(root: Path, zeta: Path, beta_pids: dict[str, int]) -> str:
    """``up -f zeta`` fails; beta's processes all still run, its records unchanged; zeta's
    workers are stopped. Returns stderr."""
    code, out, err = servelab_in(root, "up", "-f", str(zeta))
    assert code == 1, out + err
    assert "up: ok" not in out + err, out + err
    assert all(alive(pid) for pid in beta_pids.values()), err
    assert _pids(root / "beta" / "state") == beta_pids
    run = root / "zeta" / "state" / "run"
    assert not any(run.glob("*.json")) if run.exists() else True, list(run.iterdir())
    return err


@pytest.mark.timeout(600)
def test_up_over_another_deployments_router_fails(
    beta: tuple[Path, PdPorts, dict[str, int]],
) -> None:
    """The real sglang-router writes over its environment: its owner cannot be told by its
    mark, but its worker list is readable and lacks zeta's workers: the router step fails."""
    root, ports, pids = beta
    prefill, bootstrap, decode, metrics = free_ports(4)
    own = replace(ports, prefill=prefill, bootstrap=bootstrap, decode=decode, metrics=metrics)
    zeta = _zeta(root, own)
    err = _up_zeta_fails(root, zeta, pids)
    assert f"held by pid {pids['router']}" in err, err
    assert f"port {ports.router}" in err, err
    assert "does not list prefill, decode" in err, err
    assert "already up" not in err, err
    _, _, err = servelab_in(root, "down", "-f", str(zeta))  # the router, beta's, is not zeta's
    assert all(alive(pid) for pid in pids.values()), err


@pytest.mark.timeout(600)
def test_up_over_another_deployments_worker_fails(
    beta: tuple[Path, PdPorts, dict[str, int]],
) -> None:
    """A worker's port held by a process carrying beta's mark: the step fails naming beta."""
    root, ports, pids = beta
    bootstrap, decode, router, metrics = free_ports(4)
    own = replace(ports, bootstrap=bootstrap, decode=decode, router=router, metrics=metrics)
    zeta = _zeta(root, own)
    err = _up_zeta_fails(root, zeta, pids)
    assert f"prefill: port {ports.prefill} on local is held by pid {pids['prefill']}" in err, err
    assert "of deployment beta: this spec's port collides with it" in err, err
    assert "already up" not in err, err


@pytest.mark.timeout(600)
def test_up_with_a_worker_url_at_another_deployments_router_fails(
    beta: tuple[Path, PdPorts, dict[str, int]],
) -> None:
    """Seventeenth pass H1: zeta's decode url is beta's router port. The real sglang-router
    writes its title (``sglang::router``) over its argv and environment, so beta's mark cannot
    be read there; a router is still no decode worker: the decode step fails naming the pid
    and what it is, never "already up, not started by servelab" with zeta's router over it."""
    root, ports, pids = beta
    prefill, bootstrap, router, metrics = free_ports(4)
    own = PdPorts(prefill, bootstrap, ports.router, router, metrics)
    zeta = _zeta(root, own)
    err = _up_zeta_fails(root, zeta, pids)
    held = f"decode: port {ports.router} on local is held by pid {pids['router']}, a router"
    assert held in err, err
    assert "(sglang::router), not a decode worker" in err, err
    assert "already up" not in err, err
    assert not (root / "zeta" / "state" / "run" / "router.json").exists()


@pytest.mark.timeout(600)
def test_status_over_another_deployments_ports_names_it(
    beta: tuple[Path, PdPorts, dict[str, int]],
) -> None:
    """Seventeenth pass M1: zeta, another name, beta's exact ports: ``status -f zeta`` names
    beta for the rows whose process carries beta's mark, never a bare "(port owner)"."""
    root, ports, pids = beta
    zeta = _zeta(root, ports)
    _, out, err = servelab_in(root, "status", "-f", str(zeta), "--json")
    rows = {row["service"]: row for row in json.loads(out)}
    for worker in ("prefill", "decode"):
        assert rows[worker]["pid"] == pids[worker], out + err
        mark = f"beta/{worker}@local:{getattr(ports, worker)}#"  # then its state folder's place
        assert rows[worker]["other_deployment"].startswith(mark), out + err
    _, out, err = servelab_in(root, "status", "-f", str(zeta))
    for worker in ("prefill", "decode"):
        assert f"{pids[worker]} (beta's)" in out, out + err
    assert f"{pids['router']} (port owner)" in out, out + err  # its mark written over


@pytest.mark.timeout(600)
def test_down_over_another_deployments_router_suggests_no_kill(
    beta: tuple[Path, PdPorts, dict[str, int]],
) -> None:
    """Seventeenth pass L1: zeta shares beta's router port only. beta's router (its mark
    written over by its title) lists none of zeta's workers: ``down -f zeta`` leaves it alone
    and names it, never suggests ``kill -TERM`` of it."""
    root, ports, pids = beta
    prefill, bootstrap, decode, metrics = free_ports(4)
    zeta = _zeta(root, replace(ports, prefill=prefill, bootstrap=bootstrap, decode=decode,
                               metrics=metrics))  # fmt: skip
    code, out, err = servelab_in(root, "down", "-f", str(zeta))
    assert "kill" not in out + err, out + err
    assert f"held by pid {pids['router']} (sglang::router), not started by this" in out, out
    assert code == 0, out + err
    assert all(alive(pid) for pid in pids.values()), out + err


@pytest.mark.timeout(600)
def test_down_after_an_up_refused_over_a_router_on_a_worker_port_exits_0(
    beta: tuple[Path, PdPorts, dict[str, int]],
) -> None:
    """Known after the eighteenth pass: zeta's decode url is beta's router port, so ``up -f
    zeta`` is refused (the router is no decode worker). ``down -f zeta`` then found that router
    on its decode's port, could not tell whose it was, and failed (exit 1, "kill -TERM" it) with
    nothing of zeta's running. By the rule ``up`` refused by, it is another's: named, left alone,
    exit 0, and the report says nothing of zeta's was running."""
    root, ports, pids = beta
    prefill, bootstrap, router, metrics = free_ports(4)
    zeta = _zeta(root, PdPorts(prefill, bootstrap, ports.router, router, metrics))
    _up_zeta_fails(root, zeta, pids)
    code, out, err = servelab_in(root, "down", "-f", str(zeta))
    assert code == 0, out + err
    assert "kill" not in out + err, out + err
    assert f"held by pid {pids['router']} (sglang::router), not started by this" in out, out
    assert "nothing of this deployment's was running: nothing stopped" in out, out
    assert all(alive(pid) for pid in pids.values()), out + err
