"""A level's counts in ``bench --json`` agree with the top level's (the thirtieth hostile pass's
medium): requests cut by ``--deadline`` are the level's ``cut``, never its ``failed`` nor among
its ``failures``; the text says the same count. On the simulated stack behind the real router."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import run_cli
from tests.support.stack import SimStack, sim_stack


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    with sim_stack(time_scale=0.05, env={"SERVELAB_SIM_WARMUP_S": "0"}) as running:
        yield running


@pytest.mark.timeout(300)
def test_a_level_counts_the_requests_its_deadline_cut_as_cut_not_failed(stack: SimStack) -> None:
    """600 tokens a request at 8 req/s, a 3 s deadline: the requests in flight (or not yet sent)
    at the deadline are cut; none failed."""
    done = run_cli("bench", "--url", stack.router_url, "--concurrency", "16", "--rate", "8",
                   "--requests", "60", "--deadline", "3", "--input-len", "16", "--warmup", "1",
                   "--output-len", "600", "--no-ledger", "--json", timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    (level,) = doc["levels"]
    assert doc["cut"] > 0 and doc["failed"] == 0, doc
    assert level["failed"] == doc["failed"] == 0, level
    assert level["failures"] == {}, level["failures"]
    assert level["cut"] == doc["cut"], level
    assert level["ok"] + level["cut"] + level["failed"] == level["requests"], level
    assert f"C16: {doc['cut']} cut by the run's end" in done.stderr, done.stderr
    assert "failed (" not in done.stderr, done.stderr
    assert "failed:" not in done.stderr, done.stderr  # nothing failed: no line says so


@pytest.mark.timeout(300)
def test_the_run_page_shows_the_cut_requests_as_cut_not_failures(
    stack: SimStack, tmp_path: Path
) -> None:
    """The run's page from the ledger listed the requests ``--deadline`` cut under "## Failures"
    ("run deadline: 5"), and bench's stderr line began "failed:" though nothing failed (the
    thirty-first hostile pass): a cut is never a failure, in every place a run is shown."""
    ledger = tmp_path / "ledger.db"
    done = run_cli("bench", "--url", stack.router_url, "--concurrency", "16", "--rate", "8",
                   "--requests", "60", "--deadline", "3", "--input-len", "16", "--warmup", "1",
                   "--output-len", "600", "--ledger", str(ledger), timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "failed:" not in done.stderr, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if "cut by the run's end" in x]
    assert line.startswith("cut: C16: "), done.stderr
    cut = int(line.split()[2])
    assert cut > 0, line
    out = tmp_path / "docs"
    made = run_cli("report", "--ledger", str(ledger), "--out", str(out), timeout=120)
    assert made.returncode == 0, made.stderr
    (page,) = (out / "runs").glob("run-*.md")
    text = page.read_text()
    assert "## Failures" not in text, text
    assert "## Cut" in text and f"- run deadline: {cut}" in text, text
