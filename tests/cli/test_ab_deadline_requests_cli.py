"""``ab --answers check --deadline``: the load requests named beside the answer probes are the
ones sent, not those planned (the thirtieth hostile pass's low: a deadline that cut every run
still said "beside 400 load requests"). On a real stack (simulated engines, the real router)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from tests.support import run_cli
from tests.support.deployed import deployed
from tests.support.specs import write_pd_spec

REQUESTS = 200


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LoadedSpec]:
    loaded = load_spec(write_pd_spec(tmp_path / "dep", time_scale=0.05, name="ab-deadline"))
    with deployed(loaded):
        yield loaded


def _sent(ledger: Path, run_ids: list[int]) -> int:
    """The load requests the runs sent, as their stored records say."""
    with Ledger.open(ledger) as opened:
        return sum(1 for run_id in run_ids for record in opened.iter_bench_records(run_id)
                   if record.get("sent_ns"))  # fmt: skip


@pytest.mark.timeout(300)
def test_the_load_requests_beside_the_probes_are_those_sent(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    """4 req/s for 2 s a run: about 8 of each run's 200 planned requests are sent."""
    ledger = tmp_path / "ledger.db"
    export = tmp_path / "out"
    done = run_cli("ab", "-f", stack.source, "--ledger", str(ledger),
                   "--knob", f"decode:{DEFAULT_KNOB}=256,512", "--concurrency", "4",
                   "--rate", "4", "--requests", str(REQUESTS), "--deadline", "2",
                   "--repeat", "1", "--warmup", "0", "--output-len", "8", "--input-len", "8",
                   "--answers", "check", "--export", str(export), "--json",
                   timeout=240)  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    doc = json.loads(done.stdout)
    visits = [v for v in doc["visits"] if "answers" in v]
    run_ids = [i for v in visits for i in v["bench_run_ids"]]
    assert len(visits) >= 2 and run_ids, doc["visits"]
    sent = _sent(ledger, run_ids)
    assert 0 < sent < len(visits) * REQUESTS // 4, sent  # the deadline cut every run
    answers = doc["answers"]
    assert answers["requests"] == sent, (answers["requests"], sent)
    pages = "".join(p.read_text() for p in export.rglob("*.md"))
    assert f"probe requests beside {sent} load requests" in pages, pages
