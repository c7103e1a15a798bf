"""A value the engine refuses at start-up (the simulated decode exits on
``SGLANG_SM120_MMA_TARGET_CTAS=0``: it must be >= 1) in the last step of ``ab --keep`` (a
journalled A/B resumed: ``--keep`` now names an arm, which the engine took) and in
``case revert --to``: the deployment is put back as the command found it (the knob at its value,
every service answering), the command says so and exits 1; the A/B's journal session is marked
``failed``, not left ``running`` (tenth pass, H2 and H3). Real processes on a real stack.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.ab.result import ArmVisit
from servelab.core.bench.contract import BenchConfig
from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.ledger.codec import encode
from servelab.io.ledger.journal import AbJournal, SessionStatus
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec
from servelab.ops.ab.config import AbConfig
from tests.support import run_cli
from tests.support.putbacks import FOUND, TARGET, as_found, pd_stack, suspect_case

#: The value the simulated decode exits on (the knob's check takes any text for an env knob).
REFUSED = "0"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    yield from pd_stack(tmp_path_factory, "refused")


def _journal_keeping(ledger_file: Path, keep: str) -> int:
    """An A/B of ``256,512`` journalled with both its visits done and ``keep`` stored, as a
    journal written before ``--keep`` had to name an arm could hold it (``ab`` now refuses such
    a value up front: ``tests/cli/test_ab_values_cli.py``)."""
    bench = BenchConfig(url="", concurrencies=(1,), requests=4, warmup=0)
    cfg = AbConfig("decode", DEFAULT_KNOB, "256", "512", bench, repeat=1, keep=keep)
    with Ledger.open(ledger_file) as ledger:
        journal = AbJournal(ledger)
        sid = journal.start(service="decode", knob=DEFAULT_KNOB, config=encode(cfg),
                            original=FOUND)  # fmt: skip
        for position, arm in enumerate(("256", "512")):
            journal.add_visit(sid, position, ArmVisit(arm, 0, None, arm, {1: 100.0}, 0,
                                                      position=position))  # fmt: skip
    return sid


@pytest.mark.timeout(300)
def test_ab_keeping_a_value_the_engine_refuses_puts_the_original_back(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.db"
    sid = _journal_keeping(ledger, REFUSED)
    done = run_cli("ab", "-f", stack.source, "--ledger", str(ledger), "--resume", str(sid),
                   timeout=280)  # fmt: skip
    assert done.returncode == 1, (done.stdout, done.stderr)
    last = done.stderr.strip().splitlines()[-1]
    assert f"keeping {REFUSED} failed" in last and "put back as found" in last, done.stderr
    assert f"wrote back decode {DEFAULT_KNOB}={FOUND}" in last, last
    assert "Traceback" not in done.stderr
    as_found(stack)
    with Ledger.open(ledger) as led:
        session = AbJournal(led).get(sid)
    assert session is not None and session.status == SessionStatus.FAILED
    assert len(session.visits) == 2  # the measurement itself is kept


@pytest.mark.timeout(300)
def test_case_revert_to_a_value_the_engine_refuses_puts_the_knob_back(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.db"
    cid = suspect_case(ledger)
    args = ("case", "revert", cid, TARGET, "--to", REFUSED, "--yes", "-f", stack.source,
            "--ledger", str(ledger))  # fmt: skip
    done = run_cli(*args, "--json", timeout=280)
    assert done.returncode == 1, (done.stdout, done.stderr)
    doc = json.loads(done.stdout)
    assert doc["ok"] is False and doc["down"] == [] and doc["recovery"] is None
    assert doc["put_back"]["ok"] is True
    assert "put back as found" in doc["error"] and f"{DEFAULT_KNOB}={FOUND}" in doc["error"]
    assert "co-restarted decode, router" in doc["error"]
    # In the order it happened (thirteenth pass: it said "reverted ... NOT verified" first):
    # the revert failed, what was put back, whether that is verified.
    error = doc["error"]
    assert error.startswith("restart of decode failed"), error
    assert error.index("restart of decode failed") < error.index("put back as found"), error
    assert error.endswith("verified: every knob live at the value found, every service ready")
    assert doc["put_back"]["verified"] is True
    as_found(stack)
    text = run_cli(*args, timeout=280)
    assert text.returncode == 1, text.stderr
    lines = text.stdout.splitlines()
    said = f"revert of decode:{DEFAULT_KNOB}"  # SERVICE:NAME, as --change/--knob take it
    failed = [i for i, line in enumerate(lines) if line.startswith(said)]
    assert failed and f"→ {REFUSED} failed: restart of decode failed" in lines[failed[0]], lines
    then = [i for i, line in enumerate(lines) if line.startswith("then put back as found (")]
    assert then and then[0] > failed[0], lines  # after the failure and its log's tail
    assert lines[then[0]].startswith(f"then put back as found (wrote back decode {DEFAULT_KNOB}")
    assert lines[then[0]].endswith(
        "verified: every knob live at the value found, every service ready"
    )
    assert not any(line.startswith("reverted ") for line in lines), lines
    as_found(stack)
    # The put-backs are in the case's timeline, each after its failed revert.
    show = run_cli("case", "show", cid, "-f", stack.source, "--ledger", str(ledger), timeout=60)
    timeline = [line.strip() for line in show.stdout.splitlines()]
    events = [line.split("  ", 1)[-1] for line in timeline if "revert" in line]
    put = (f"revert failed; put back as found (wrote back decode {DEFAULT_KNOB}={FOUND}; "
           "co-restarted decode, router): verified live")  # fmt: skip
    assert [e for e in events if e.startswith("revert failed")] == [put, put], timeline
    reverts = [i for i, e in enumerate(events) if e.startswith("revert decode")]
    puts = [i for i, e in enumerate(events) if e == put]
    assert len(reverts) == 2 and all(r < p for r, p in zip(reverts, puts, strict=True)), events


def test_case_revert_to_a_value_the_knob_refuses_changes_nothing(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.db"
    cid = suspect_case(ledger)
    done = run_cli("case", "revert", cid, TARGET, "--to", "5\u200b12", "--yes", "-f",
                   stack.source, "--ledger", str(ledger), "--json")  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "invisible character" in done.stderr
    as_found(stack)
