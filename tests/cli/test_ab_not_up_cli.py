"""`servelab ab` and `servelab tune` on a deployment that is not up (issue 38): refused before
anything is started, stopped or journalled (exit 2, ``--json`` naming ``RunRefused`` and each
service not ready). They used to start the decode for their first arm, wait for a router that
could never be ready, fail mid-way and leave the decode running."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from tests.support import run_cli
from tests.support.specs import write_pd_spec

KNOB = f"decode:{DEFAULT_KNOB}=256,512"
BENCH = ("--concurrency", "2", "--requests", "4", "--warmup", "0", "--output-len", "4")


def _pids(spec: str) -> dict[str, object]:
    """Each service's pid as ``status --json`` shows it."""
    doc = json.loads(run_cli("status", "-f", spec, "--json").stdout)
    return {row["service"]: row["pid"] for row in doc}


def _journalled(ledger: Path) -> int:
    """How many A/B and tune journal rows the ledger holds (0: none, or no ledger)."""
    if not ledger.exists():
        return 0
    with sqlite3.connect(ledger) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        return sum(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                   for t in ("ab_sessions", "tune_runs") if t in tables)  # fmt: skip


@pytest.mark.timeout(240)
def test_ab_and_tune_refuse_a_deployment_whose_router_is_down(tmp_path: Path) -> None:
    """The workers up, the router not: each command exits 2 naming the router, and the workers
    run on as they were (same pids), the router still down, nothing journalled."""
    spec = str(write_pd_spec(tmp_path, knob="256", time_scale=0.05))
    ledger = tmp_path / "ledger.db"
    assert run_cli("up", "-f", spec, "--ledger", str(ledger), "decode").returncode == 0
    try:
        before = _pids(spec)
        assert before["router"] is None and before["decode"] is not None, before
        for command, knob in (("ab", KNOB), ("tune", KNOB)):
            done = run_cli(command, "-f", spec, "--ledger", str(ledger), "--knob", knob, *BENCH,
                           "--json", timeout=100)  # fmt: skip
            assert done.returncode == 2, (command, done.stdout, done.stderr)
            doc = json.loads(done.stdout)
            assert doc["error_type"] == "RunRefused" and doc["exit_code"] == 2, doc
            assert "the deployment is not up (router not ready" in doc["error"], doc
            assert "prefill" not in doc["error"].split(" not ready")[0], doc
            assert f"`servelab up -f {spec}`" in done.stderr, done.stderr
            assert _pids(spec) == before, command
        assert _journalled(ledger) == 0
    finally:
        run_cli("down", "-f", spec, "--ledger", str(ledger))


def test_ab_refuses_a_deployment_with_nothing_running(tmp_path: Path) -> None:
    """Nothing up: every service named, nothing started (the decode's port stays closed)."""
    spec = str(write_pd_spec(tmp_path, knob="256"))
    ledger = tmp_path / "ledger.db"
    try:
        done = run_cli("ab", "-f", spec, "--ledger", str(ledger), "--knob", KNOB, *BENCH,
                       timeout=100)  # fmt: skip
        assert done.returncode == 2, done.stderr
        words = "the deployment is not up (prefill, decode, router not ready: prefill: no answer"
        assert words in done.stderr
        assert all(pid is None for pid in _pids(spec).values())
        assert _journalled(ledger) == 0
    finally:  # without the refusal, the A/B started services
        run_cli("down", "-f", spec, "--ledger", str(ledger))
