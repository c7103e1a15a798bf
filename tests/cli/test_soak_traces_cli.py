"""``servelab soak -f`` with a spec's ``[tracing]``, as real processes: ``servelab up`` starts the
real sglang-router and the simulated workers exporting spans, the decode's KV transfers all fail
(``SERVELAB_SIM_TRANSFER_FAIL_OVER_TOKENS=0``), and the soak's receiver records every span with
the soak in the ledger and names each failed request's phases so far."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from servelab.core.load.identity import trace_of
from servelab.core.soak.record import SoakRunRecord
from servelab.io.ledger.ledger import Ledger
from tests.support import run_cli
from tests.support.tracing import write_traced_spec


def _cli(root: Path, *args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    ledger = {"SERVELAB_LEDGER": str(root / "state" / "ledger.db")}
    return run_cli(*args, cwd=root, timeout=timeout, env=ledger)


def test_a_traced_soak_records_its_spans_and_names_where_requests_stopped(
    tmp_path: Path,
) -> None:
    fault = "SERVELAB_SIM_TRANSFER_FAIL_OVER_TOKENS=0\n"
    write_traced_spec(tmp_path, wait_s=10.0, time_scale=0.05, decode_env=fault, name="tsoak")
    up = _cli(tmp_path, "up")
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        done = _cli(tmp_path, "soak", "--sessions", "2", "--rounds", "2", "--idle-timeout", "3",
                    "--duration", "30", "--no-localize", "--json")  # fmt: skip
    finally:
        down = _cli(tmp_path, "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert done.returncode == 1, done.stdout + done.stderr  # problems found: the failures
    doc = json.loads(done.stdout)
    traces = doc["traces"]
    assert traces["n_spans"] > 0 and len(traces["requests"]) == len(doc["errors"]) == 2
    for request in traces["requests"]:
        assert request["outcome"] == "error" and request["request_id"].startswith("servelab-")
        # as SGLang, a failed transfer exports no decode_transferred: it stopped in the transfer
        assert request["last"] == "prefill", request
        assert request["first_missing"] == "kv_transfer"
    with Ledger.open(tmp_path / "state" / "ledger.db") as ledger:
        (soak,) = ledger.list(SoakRunRecord)
        spans = ledger.spans(soak_id=soak.id)
    assert len(spans) == traces["n_spans"]
    traces_of = {s.trace_id for s in spans}  # each failed request's spans, in its own trace
    assert {trace_of(r["request_id"]) for r in traces["requests"]} <= traces_of
