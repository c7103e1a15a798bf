"""Requests cut by ``--deadline`` are not SLO misses (the 28th hostile pass's high): a bench whose
every answered request is far within ``ttft_p99=2s`` said "SLO missed", and a capacity search
named "capacity 1.94 req/s" where 4 req/s held, because the requests the deadline cut (unsent, or
mid-stream) counted as outside every limit. On the simulated stack behind the real router."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support import run_cli
from tests.support.stack import SimStack, sim_stack

LOAD = ("--input-len", "16", "--warmup", "1", "--no-ledger", "--json")


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    with sim_stack(time_scale=0.05, env={"SERVELAB_SIM_WARMUP_S": "0"}) as running:
        yield running


@pytest.mark.timeout(300)
def test_a_run_cut_by_its_deadline_is_judged_on_what_it_measured(stack: SimStack) -> None:
    """600 tokens a request: those in flight at the deadline are cut mid-stream, their first
    token long come (within the limit): counted within, never as misses (a p90: one request cut
    before its first token is outside for the verdict, as not known)."""
    done = run_cli("bench", "--url", stack.router_url, "--concurrency", "16", "--rate", "8",
                   "--requests", "60", "--deadline", "4", "--slo", "ttft_p90=2s",
                   *LOAD, "--output-len", "600", timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    level = doc["levels"][0]
    cut = level["cut"]
    assert cut > 0 and doc["cut"] == cut and doc["failed"] == 0, level["failures"]
    assert level["failures"] == {} and level["failed"] == 0, level
    ttft, slo = level["slo"]["objectives"][0], level["slo"]
    # the cut streamed: their TTFTs count (within); one cut before its first token is unknown
    assert ttft["n"] + ttft["unknown"] == level["requests"] and ttft["unknown"] <= 1, slo
    assert ttft["within"] == ttft["n"] and ttft["n"] >= level["ok"] + cut - 1, slo
    assert slo["met"] is True and slo["requests"] == level["requests"], slo
    assert slo["good"] == level["ok"], slo
    assert "SLO missed" not in done.stderr, done.stderr


@pytest.mark.timeout(300)
def test_a_capacity_search_whose_probes_the_deadline_cuts_finds_no_false_limit(
    stack: SimStack,
) -> None:
    """100 requests at 4 req/s span 25 s: a 12 s deadline cuts every probe (the pass's
    reproduction); the latencies hold at the rate asked, so no lower capacity is named."""
    done = run_cli("bench", "--url", stack.router_url, "--find-capacity", "--rate", "4",
                   "--concurrency", "32", "--slo", "ttft_p90=2s", "--probe-s", "4",
                   "--deadline", "12", *LOAD, "--output-len", "8", timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    probed = {p["load"]: p for p in doc["probes"]}
    assert probed[4.0]["met"] is True, doc["probes"]
    assert doc["capacity"] is None or doc["capacity"] >= 4.0, doc
