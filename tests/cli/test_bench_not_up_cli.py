"""``servelab bench -f SPEC`` and ``servelab case test`` on a deployment that is not up (issue 38):
refused up front as ``ab``/``tune`` are (exit 2, ``RunRefused``, naming each service not ready
and the ``servelab up -f ...`` that brings it back), where they said only "no answer". ``bench``
probes only what its load goes through (the entry point and the workers behind it) and only with
a spec; a bare ``--url`` is a server of the operator's, its failure said as before. Real
simulated workers, a real CLI; nothing is started or stopped by the refused commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.io.specfile import load_spec
from tests.support import run_cli
from tests.support.specs import write_pd_spec

TARGET = f"knob:decode/{DEFAULT_KNOB}"
SMALL = ("--concurrency", "1", "--requests", "2", "--warmup", "0", "--output-len", "4")


def _pids(spec: str) -> dict[str, object]:
    """Each service's pid as ``status --json`` shows it."""
    doc = json.loads(run_cli("status", "-f", spec, "--json").stdout)
    return {row["service"]: row["pid"] for row in doc}


@pytest.mark.timeout(240)
def test_bench_refuses_a_spec_whose_router_is_down_and_a_bare_url_is_not_refused(
    tmp_path: Path,
) -> None:
    spec = str(write_pd_spec(tmp_path, knob="256", time_scale=0.05))
    ledger = tmp_path / "ledger.db"
    assert run_cli("up", "-f", spec, "--ledger", str(ledger), "decode").returncode == 0
    try:
        before = _pids(spec)
        assert before["router"] is None and before["decode"] is not None, before
        done = run_cli("bench", "-f", spec, "--ledger", str(ledger), *SMALL, "--json", timeout=100)
        assert done.returncode == 2, (done.stdout, done.stderr)
        doc = json.loads(done.stdout)
        assert doc["error_type"] == "RunRefused" and doc["exit_code"] == 2, doc
        assert "the deployment is not up (router not ready: router: " in doc["error"], doc
        assert "bench needs the services it sends to up" in doc["error"], doc
        assert f"`servelab up -f {spec}`" in done.stderr, done.stderr
        assert _pids(spec) == before
        text = run_cli("bench", "-f", spec, "--ledger", str(ledger), *SMALL, timeout=100)
        assert text.returncode == 2 and "router not ready" in text.stderr, text.stderr
        # a bare --url (no spec): the operator's server, not probed up front, said as before
        router = load_spec(Path(spec)).spec.services["router"].url
        bare = run_cli("bench", "--url", router, "--no-ledger", *SMALL, cwd=tmp_path, timeout=100)
        assert bare.returncode == 1, (bare.stdout, bare.stderr)
        assert "not up" not in bare.stderr and "127.0.0.1" in bare.stderr, bare.stderr
    finally:
        run_cli("down", "-f", spec, "--ledger", str(ledger))


def test_case_test_refuses_a_deployment_with_nothing_running(tmp_path: Path) -> None:
    spec = str(write_pd_spec(tmp_path, knob="256"))
    led = ("--ledger", str(tmp_path / "ledger.db"))
    opened = run_cli("case", "open", "answers went wrong", "-f", spec, *led, "--json")
    assert opened.returncode == 0, opened.stderr
    cid = str(json.loads(opened.stdout)["id"])
    suspect = run_cli("case", "suspect", cid, TARGET, "--reason", "changed", "-f", spec, *led)
    assert suspect.returncode == 0, suspect.stderr
    try:
        done = run_cli("case", "test", cid, TARGET, "--test", "answers@C1", "--to", "512",
                       "--rounds", "1", "-f", spec, *led, timeout=100)  # fmt: skip
        assert done.returncode == 2, (done.stdout, done.stderr)
        words = "the deployment is not up (prefill, decode, router not ready: prefill: no answer"
        assert words in done.stderr, done.stderr
        assert "case test needs every service ready" in " ".join(done.stderr.split())
        assert all(pid is None for pid in _pids(spec).values())
        # the case, the target and its values are checked first
        other = f"knob:decode/{DEFAULT_KNOB}X"
        unknown = run_cli("case", "test", cid, other, "--test", "answers@C1", "--to", "512",
                          "-f", spec, *led)  # fmt: skip
        assert unknown.returncode != 0 and "is not a suspect of case" in unknown.stderr
        assert "not up" not in unknown.stderr, unknown.stderr
    finally:
        run_cli("down", "-f", spec, *led)
