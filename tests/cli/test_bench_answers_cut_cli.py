"""``bench --check-answers`` with a ``--deadline`` that cuts the probes (the thirty-first hostile
pass's high): a probe cut by the run's end is not a wrong answer. It is counted apart as cut in
the level's answers (JSON and text), and a level whose every probe was cut says its answers were
not checked. On the simulated stack behind the real router."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from tests.support import run_cli
from tests.support.stack import SimStack, sim_stack


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    with sim_stack(time_scale=0.2, env={"SERVELAB_SIM_WARMUP_S": "0"}) as running:
        yield running


@pytest.mark.timeout(300)
def test_probes_cut_by_the_deadline_are_counted_cut_not_wrong(stack: SimStack) -> None:
    """64 requests of 400 tokens at C64 and a 0.15 s deadline: the run ends with the 3 probes
    among them still in flight, mostly (on a busy machine a probe may not have left by then,
    neither judged nor cut, or a short one may have ended, judged): a cut one is never wrong."""
    args = ("bench", "--url", stack.router_url, "--concurrency", "64", "--requests", "64",
            "--output-len", "400", "--input-len", "16", "--warmup", "0", "--deadline", "0.15",
            "--check-answers", "--no-ledger")  # fmt: skip
    done = run_cli(*args, "--json", timeout=240)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    (level,) = doc["levels"]
    answers = level["answers"]
    assert answers["cut"] >= 1 and answers["cut"] + answers["answers"] <= 3, answers
    assert answers["wrong"] == 0, answers
    assert answers["failures"] == [] and answers["differ"] == 0, answers
    text = run_cli(*args, timeout=240)
    assert text.returncode == 0, text.stderr
    said = r"(not checked: (all [123] probes cut|no probe sent)|[123] cut) by the run's end"
    assert re.search(said, text.stdout), text.stdout
    assert "request-failed" not in text.stdout, text.stdout
