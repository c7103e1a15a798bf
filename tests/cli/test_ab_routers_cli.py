"""`servelab ab` as a real process against a real stack (sim workers + the real router), on each
SGLang router: JSON shape, files written, the knob restored (a file of its own, so that the
parallel pass can run it beside the rest of tests/cli/test_ab_cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from tests.support import run_cli
from tests.support.specs import ROUTER_KINDS, write_pd_spec


@pytest.mark.timeout(240)
@pytest.mark.parametrize("kind", ROUTER_KINDS)
def test_ab_json_files_and_restore(kind: str, tmp_path: Path) -> None:
    """On both SGLang routers: smg routes by model, so every request names the one it lists."""
    spec = str(write_pd_spec(tmp_path, knob="512", time_scale=0.05, router_kind=kind))
    ledger = str(tmp_path / "ledger.db")
    assert run_cli("up", "-f", spec, "--ledger", ledger).returncode == 0
    try:
        out = tmp_path / "out"
        result = run_cli(
            "ab", "-f", spec, "--ledger", ledger, "--knob", f"decode:{DEFAULT_KNOB}=256,512",
            "--concurrency", "2,4", "--repeat", "2", "--requests", "12", "--warmup", "2",
            "--output-len", "8", "--input-len", "32", "--export", str(out), "--json",
            timeout=200,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        doc = json.loads(result.stdout)
        assert [arm["value"] for arm in doc["arms"]] == ["256", "512"]
        assert doc["visits"] and all(v["failed_requests"] == 0 for v in doc["visits"])
        assert [c["concurrency"] for c in doc["comparisons"]] == [2, 4]
        assert all(len(v) == 2 for arm in doc["arms"] for v in arm["throughput"].values())
        assert doc["restored"] is True and doc["original"] == "512"
        assert isinstance(doc["anomalies"], list)
        assert sorted(p.name for p in out.iterdir()) == [
            f"ab-{doc['ab_id']}.md",
            f"ab-{doc['ab_id']}.png",
        ]
        assert "verified live" in result.stderr
        # one progress line per level and visit (2 arms x 2 repeats), not one per concurrent user
        assert result.stderr.count("C4: 12 requests measured") == 4, result.stderr
        assert result.stderr.count("C2: 12 requests measured") == 4, result.stderr
        knob = run_cli("knob", "diff", "decode", DEFAULT_KNOB, "-f", spec, "--json")
        assert json.loads(knob.stdout)["live"] == "512"
    finally:
        run_cli("down", "-f", spec, "--ledger", ledger)
