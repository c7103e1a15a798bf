"""``servelab investigate --symptom answers``: a setting that changes answers, convicted for it.

The simulator's bf16 index keys (``SGLANG_NSA_INDEX_KEYS_BF16=1``) alter one greedy answer in three
once more than 16 requests run. Recorded after a passing verification, the change is found by the
answer probes at C64 (against references taken at low concurrency, where the answers are still
right), localized to the answers, tested by ``case test --test answers`` (the probes with the
change and without it, each arm co-restarted and proven live), convicted, and left reverted.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.case import case as cases
from servelab.ops.context import Operation
from servelab.ops.deploy import deploy
from servelab.ops.knob import get_knob, set_knob
from servelab.ops.verify.verify import verify
from tests.support import run_cli
from tests.support.deployed import deployed
from tests.support.specs import write_pd_spec

BF16 = "SGLANG_NSA_INDEX_KEYS_BF16"
TARGET = f"knob:decode/{BF16}"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LoadedSpec]:
    spec = write_pd_spec(tmp_path, time_scale=0.2, name="answers", knobs=(DEFAULT_KNOB, BF16),
                         decode_toml=f'reads_env = ["{DEFAULT_KNOB}", "{BF16}"]\n')  # fmt: skip
    loaded = load_spec(spec)
    with deployed(loaded):
        yield loaded


async def _changed(stack: LoadedSpec, ledger: Ledger) -> int:
    assert (await verify(stack, ledger=ledger)).ok
    async with Operation(stack, ledger=ledger) as op:
        await set_knob(op, "decode", BF16, "1", reason="faster decode")
        await deploy.restart(op, ["decode"], verify_after=False)
    return cases.open_case(ledger, "tool calls come back broken at high concurrency")


@pytest.mark.timeout(900)
def test_a_setting_that_changes_answers_is_convicted_for_answers(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger_file = tmp_path / "ledger.db"
    with Ledger.open(ledger_file) as ledger:
        cid = asyncio.run(_changed(stack, ledger))
    led, spec = ("--ledger", str(ledger_file)), ("-f", stack.source)
    started = time.monotonic()
    done = run_cli("investigate", "--symptom", "answers", "--case", str(cid), "--yes", "--json",
                   "--requests", "400", "--input-len", "32", "--output-len", "16", *spec, *led,
                   timeout=850)  # fmt: skip
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stderr + done.stdout
    doc = json.loads(done.stdout)
    restarts = sum(": started pid " in line for line in done.stderr.splitlines())
    print(f"investigate --symptom answers: {wall:.1f} s wall, {restarts} service starts\n"
          + "\n".join(doc["lines"]))  # fmt: skip
    state = doc["state"]
    assert state["reproduced"] is True and state["layer"] == "correctness"
    assert [(s["knob"], s.get("good"), s["suspected"]) for s in state["suspects"]] == [
        (BF16, None, "1")
    ]
    (decided,) = state["decided"]
    assert (decided["target"], decided["outcome"], decided["by"]) == (
        TARGET, "convicted", "case test")  # fmt: skip
    assert state["reverted"] == [TARGET] and state["ending"] == "resolved"
    assert asyncio.run(get_knob(stack, "decode", BF16)) is None  # left reverted
    with Ledger.open(ledger_file) as ledger:
        assert cases.view_case(ledger, cid).case.status == "resolved"
