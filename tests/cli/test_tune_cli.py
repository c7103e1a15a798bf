"""``servelab tune`` on a real stack: an argument knob's arms made live through the real router,
the worse one dropped at the first look, the tune interrupted and resumed from its journal, the
best arm kept; ``--screen`` of three knobs where only the cap matters; and ``--plan`` from a
recorded A/B. An arm dropped for its answers, on a stack of its own, is
tests/cli/test_tune_answers_cli.py; ``--plan`` and the refusals that need no stack are
tests/cli/test_tune_plan_cli.py.

The decode's running batch capped at 4 against 64, at C32: the cap makes a request wait for a slot,
about a seventh of the throughput, which the rule shows after block 3 (its first look) whatever
the machine's noise; one arm left, the tune stops best, before its budget of 4 blocks.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servelab.core.ab.tuneevents import TuneVisitStarted
from servelab.core.ab.tunerun import TuneKnob
from servelab.core.bench.contract import BenchConfig
from servelab.core.progress import ProgressEvent
from servelab.io.ledger.journal import SessionStatus
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tunes import TuneStore
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.ab.tune import run_tune
from servelab.ops.ab.tuneconfig import TuneConfig
from servelab.ops.knob import get_knob, live_knob
from tests.support import run_cli
from tests.support.deployed import deployed
from tests.support.specs import write_pd_spec

CAP = "--max-running-requests"
#: Knobs the simulator does not act on: the cache report only adds a field to responses, and an
#: environment variable it never reads.
REPORT, NOOP = "--enable-cache-report", "SERVELAB_SCREEN_NOOP"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    root = tmp_path_factory.mktemp("tune")
    spec = write_pd_spec(
        root, time_scale=0.1, name="tune",
        knobs=("SGLANG_SM120_MMA_TARGET_CTAS", CAP, REPORT, NOOP),
        decode_env="SGLANG_ARGS=\n", worker_env="SERVELAB_SIM_WARMUP_S=0\n",
        decode_toml='args_env = "SGLANG_ARGS"\n',
    )  # fmt: skip
    loaded = load_spec(spec)
    with deployed(loaded):
        yield loaded


class _Stop(Exception):
    """Raised by the progress callback: the tune is interrupted before its fourth visit."""


def _stop_at_the_fourth_visit(event: ProgressEvent) -> None:
    if isinstance(event, TuneVisitStarted) and (event.block, event.index) == (2, 1):
        raise _Stop


def _cli(*args: str, code: int = 0) -> Any:
    done = run_cli(*args, "--json", timeout=600)
    assert done.returncode == code, done.stderr + done.stdout
    doc = json.loads(done.stdout)
    assert "--plan" in args or doc["ok"] is (code == 0), doc  # what a script reads
    return doc, done.stderr


@pytest.mark.timeout(600)
def test_a_tune_is_interrupted_resumed_and_keeps_the_best_arm(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger_file = tmp_path / "ledger.db"
    bench = BenchConfig(url="", concurrencies=(32,), requests=64, warmup=2, idle_timeout_s=30)
    cfg = TuneConfig((TuneKnob("decode", CAP, ("4", "64")),), bench, max_rounds=4, keep_best=True)
    with Ledger.open(ledger_file) as ledger:
        with pytest.raises(_Stop):
            asyncio.run(run_tune(stack, cfg, ledger=ledger, progress=_stop_at_the_fourth_visit))
        (stored,) = TuneStore(ledger).list()
        assert stored.status == SessionStatus.INTERRUPTED and stored.original == (None,)
    assert asyncio.run(get_knob(stack, "decode", CAP)) is None  # put back when interrupted
    led, spec = ("--ledger", str(ledger_file)), ("-f", stack.source)
    export = tmp_path / "out"
    doc, stderr = _cli("tune", "--resume", str(stored.tune_id), "--export", str(export), *spec,
                       *led)  # fmt: skip
    assert f"resuming tune {stored.tune_id}: 3 visit(s) kept" in stderr
    assert "verified live" in stderr and "dropped after block 3" in stderr
    (level,) = doc["tunes"]
    assert level["result"]["outcome"] == "best" and level["result"]["winner"] == "64"
    assert [e["arm"] for e in level["result"]["eliminations"]] == ["4"]
    assert len(doc["visits"]) == 6 and [v["position"] for v in doc["visits"]] == list(range(6))
    assert doc["best"] == "64" and doc["kept"] == "64" and not doc["restored"]
    assert doc["cost"]["visits"] == 6 and doc["full_cost"]["visits"] == 8
    assert {Path(f).name for f in doc["files"]} == {f"tune-{stored.tune_id}.md",
                                                    f"tune-{stored.tune_id}.png"}  # fmt: skip
    assert asyncio.run(live_knob(stack, "decode", CAP)) == "64"  # the best arm, live
    finished, _ = _cli("tune", "--resume", str(stored.tune_id), *spec, *led, code=2)
    assert "already finished" in finished["error"]


@pytest.mark.timeout(900)
@pytest.mark.solo  # three runs of it beside a parallel suite and a demo (load 5-8) read the no-op
# knob as active: the machine's drift between blocks outgrew its ±30% margin at C8
def test_a_screening_of_three_knobs_tunes_only_the_one_that_matters(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    """The full 2^3 design (no resolution-IV fraction of three factors) in blocks of 8 visits;
    the cap halves the throughput at C8, an active effect; the harmless knobs' and every
    interaction are negligible within a 30% margin (the first look, after block 3, is about ±12%
    wide at C8; at C32 the uncapped runs' tok/s varied ±20% on this shared machine, too wide to
    rule anything out); the tune then runs over the cap alone, the others held at their low
    value."""
    original = asyncio.run(get_knob(stack, "decode", CAP))
    knobs = ("--knob", f"decode:{CAP}=4,64", "--knob", f"decode:{REPORT}=off,on",
             "--knob", f"decode:{NOOP}=a,b")  # fmt: skip
    doc, stderr = _cli("tune", "--screen", *knobs, "--concurrency", "8", "--requests", "64",
                       "--warmup", "2", "--idle-timeout", "30", "--max-rounds", "3",
                       "--margin", "30%", "-f", stack.source,
                       "--ledger", str(tmp_path / "ledger.db"))  # fmt: skip
    screening = doc["screening"]
    assert len(screening["design"]["runs"]) == 8 and len(screening["visits"]) == 8 * 3
    (level,) = screening["levels"]
    status = {tuple(e["contrast"]["effects"][0]): e["status"] for e in level["effects"]}
    assert status == {(CAP,): "active", (REPORT,): "negligible", (NOOP,): "negligible",
                      (CAP, REPORT): "negligible", (CAP, NOOP): "negligible",
                      (REPORT, NOOP): "negligible"}, level  # fmt: skip
    assert screening["follow_up"]["factors"] == [CAP]
    assert screening["follow_up"]["fixed"] == [REPORT, NOOP]
    assert f"screening stopped after 3 block(s): tuning {CAP}" in stderr
    arms = [(a["label"], a["values"]) for a in doc["arms"]]
    assert arms == [("4", ["4", "off", "a"]), ("64", ["64", "off", "a"])]
    assert doc["best"] == "64" and doc["restored"]
    assert doc["cost"]["visits"] == 24 + len(doc["visits"]) <= 24 + 2 * 3
    assert doc["full_cost"]["visits"] == 8 * 3
    assert asyncio.run(get_knob(stack, "decode", CAP)) == original  # put back


def test_a_tune_whose_first_block_outruns_its_budget_says_so_before_it_is_spent(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    """Defect 24 (issue 38): a 20-arm tune with --max-minutes 0.5 ran 79 s without a warning.
    The budget is checked between blocks, so the first block runs whole: the tune now prices it
    (from its first visit, the ledger having no tune) and warns, with the estimate, before the
    rest of the block; then it stops at the budget."""
    doc, stderr = _cli("tune", "--knob", "decode:SGLANG_SM120_MMA_TARGET_CTAS=256,384,512",
                       "--concurrency", "1", "--requests", "4", "--max-rounds", "3",
                       "--max-minutes", "0.001", "-f", stack.source,
                       "--ledger", str(tmp_path / "ledger.db"))  # fmt: skip
    warning = "warning: --max-minutes 0.001 is shorter than the first block: 3 visit(s) at"
    assert warning in stderr and "(this tune's first visit)" in stderr, stderr
    assert stderr.index(warning) < stderr.index("visit 2/3"), stderr
    assert doc["time_budget_hit"] and len(doc["visits"]) == 3 and doc["restored"]


@pytest.mark.timeout(600)
def test_a_tune_whose_runs_cannot_carry_a_probe_says_its_answers_were_not_checked(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    """``--answers gate`` (the default) with runs of 16 requests (5% of them is less than one
    probe): the tune runs on speed alone and says so in its headline, ``--json``, the ledger and
    on stderr, never silently."""
    ledger_file = tmp_path / "ledger.db"
    doc, stderr = _cli("tune", "--knob", f"decode:{CAP}=4,64", "--concurrency", "8",
                       "--requests", "16", "--warmup", "2", "--idle-timeout", "30",
                       "--max-rounds", "3", "-f", stack.source,
                       "--ledger", str(ledger_file))  # fmt: skip
    assert doc["answers_unchecked"] == "too_few_requests"
    assert "answers" not in doc and not doc.get("dropped")  # no probe was sent, none judged
    assert "answers NOT checked (a run's --requests cannot carry one probe" in doc["headline"]
    assert "answers NOT checked" in stderr
    with Ledger.open(ledger_file) as ledger:
        (stored,) = TuneStore(ledger).list()
    assert stored.result is not None and stored.result.answers_unchecked == "too_few_requests"
    assert all(v.answers is None for v in stored.result.visits)
