"""Issue 38, 22nd pass M2: ``bench --find-capacity`` against a deployment whose decode was killed
said "the SLO was missed at every load tried, down to C1" (tok/s 0) and never that the requests
failed. A probe whose requests mostly fail ends the search with no capacity verdict: exit 1,
``"stop": "requests failed"`` and the first error in ``--json``, the same in words."""

from __future__ import annotations

import json

from tests.support import run_cli
from tests.support.stack import sim_stack


def test_a_search_whose_requests_all_fail_says_so_and_gives_no_verdict() -> None:
    with sim_stack(time_scale=0.05, env={"SERVELAB_SIM_WARMUP_S": "0"}) as stack:
        decode = stack.procs.pop("decode")
        decode.kill()
        decode.wait(timeout=30)
        args = ("bench", "--url", stack.router_url, "--find-capacity", "--slo", "ttft_p99=1s",
                "--concurrency", "4,16", "--requests", "16", "--input-len", "16",
                "--output-len", "8", "--warmup", "0", "--no-ledger")  # fmt: skip
        done = run_cli(*args, "--json", timeout=300)
        table = run_cli(*args, timeout=300)
    assert done.returncode == 1, (done.stdout, done.stderr)
    doc = json.loads(done.stdout)
    assert doc["stop"] == "requests failed" and doc["capacity"] is None, doc["conclusion"]
    assert [p["load"] for p in doc["probes"]] == [4]  # no descent through loads that all fail
    assert doc["probes"][0]["failed"] == 1.0 and doc["failed"] == 16
    assert doc["first_error"], doc
    assert doc["conclusion"].startswith("no capacity verdict: every request at C4 failed")
    assert f"(first error: {doc['first_error']})" in doc["conclusion"]
    assert "missed at every load" not in doc["conclusion"]
    assert table.returncode == 1, (table.stdout, table.stderr)
    assert "no capacity verdict: every request at C4 failed" in " ".join(table.stdout.split())
