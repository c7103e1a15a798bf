"""The 2P2D example through the CLI as real processes: status and verify per worker,
`restart --rolling` with --json, and what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.sim.settings import ENV_EXTRAS
from tests.support import run_cli
from tests.support.processes import listening
from tests.support.specs import ROUTER_KINDS
from tests.support.xpyd import write_2p2d_spec

WORKERS = ["prefill-1", "prefill-2", "decode-1", "decode-2"]


def _status(spec: str, env: dict[str, str]) -> list[dict[str, object]]:
    status = run_cli("status", "-f", spec, "--json", env=env)
    assert status.returncode == 0, status.stdout + status.stderr
    return list(json.loads(status.stdout))


def _verify_per_worker(spec: str, env: dict[str, str]) -> None:
    verify = run_cli("verify", "-f", spec, "--json", env=env, timeout=150)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    checks = json.loads(verify.stdout)["checks"]
    reached = {c["service"]: c for c in checks if c["code"] == "e2e.worker_reached"}
    assert sorted(reached) == sorted(WORKERS)  # every prefill and decode, through the router
    assert all(c["served_after"] > c["served_before"] for c in reached.values())
    # proven by each engine's own real counter (SGLang's, in its /metrics), the simulator's
    # extras off: what a real SGLang deployment offers
    assert all(
        (c["signal"], c["counter"]) == ("engine", "sglang:num_requests_total")
        for c in reached.values()
    )
    assert all(
        c["detail"].startswith("reached through router: its sglang:num_requests_total")
        for c in reached.values()
    )
    # the router's --policy (in ROUTER_ARGS): both routers write over their argv, so the live
    # check reads the policy it reports routing with, once the e2e probe has been routed
    (policy,) = [c for c in checks if c["code"].startswith("live.") and c.get("knob") == "--policy"]
    assert (policy["ok"], policy["live_source"], policy["live"]) == (
        True,
        "reported",
        "cache_aware",
    )
    assert "argv written over by the process, which reports cache_aware" in policy["detail"]
    router = next(c for c in checks if c["layer"] == "health" and c["service"] == "router")
    assert router["missing"] == [] and [w["service"] for w in router["workers"]] == WORKERS
    assert "router lists prefill-1 healthy" in router["detail"]


@pytest.mark.timeout(400)
@pytest.mark.parametrize("kind", ROUTER_KINDS)
def test_2p2d_status_verify_and_rolling_restart(kind: str, tmp_path: Path) -> None:
    """On sglang-router 0.3.2 and on smg 1.13 (which lists a removed worker as draining for
    about 5 s: the remove phase waits until it is gone)."""
    spec_path, ports = write_2p2d_spec(tmp_path, router=kind)
    spec = str(spec_path)
    # the simulator's extras off (whatever the outer environment says): real signals only
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db"), ENV_EXTRAS: ""}
    try:
        up = run_cli("up", "-f", spec, "--json", env=env, timeout=200)
        assert up.returncode == 0, up.stdout + up.stderr
        rows = {row["service"]: row for row in _status(spec, env)}
        assert all(rows[w]["in_router"] and rows[w]["router_healthy"] for w in WORKERS)
        assert rows["router"]["in_router"] is None
        _verify_per_worker(spec, env)
        refused = run_cli("restart", "--rolling", "router", "-f", spec, env=env)
        assert refused.returncode == 2 and "only prefill and decode workers can roll" in (
            refused.stderr
        )
        bare = run_cli("restart", "--rolling", "-f", spec, env=env)
        assert bare.returncode == 2 and "--rolling needs ROLE or SERVICE" in bare.stderr
        knob = run_cli("knob", "set", "decode-2", f"{DEFAULT_KNOB}=256", "-f", spec, env=env)
        assert knob.returncode == 0, knob.stderr
        roll = run_cli(
            "restart", "--rolling", "decode-2", "-f", spec, "--json", env=env, timeout=200
        )
        assert roll.returncode == 0, roll.stdout + roll.stderr
        doc = json.loads(roll.stdout)
        assert doc["ok"] and doc["plan"] == ["decode-2"] and doc["out"] is None
        phases = doc["workers"][0]["phases"]
        assert [p["phase"] for p in phases] == [
            "remove",
            "drain",
            "restart",
            "verify",
            "add",
            "routed",
        ]
        assert all(p["ok"] and p["detail"] for p in phases)
        checks = doc["workers"][0]["verification"]["checks"]
        live = [c for c in checks if c["layer"] == "live" and c["knob"] == DEFAULT_KNOB]
        assert [c["live"] for c in live] == ["256"]
        text = run_cli("restart", "--rolling", "prefill-1", "-f", spec, env=env, timeout=200)
        assert text.returncode == 0, text.stdout + text.stderr
        assert "rolling restart of prefill-1 through router" in text.stdout
        assert "rolling restart: ok" in text.stdout
        rows = {row["service"]: row for row in _status(spec, env)}
        assert all(rows[w]["in_router"] for w in WORKERS)
    finally:
        down = run_cli("down", "-f", spec, env=env)
    assert down.returncode == 0, down.stderr
    assert not any(listening(port) for port in ports)
