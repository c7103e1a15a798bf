"""``investigate --symptom answers`` decides the suspect it names when the suspect's answers
differ even in verify's own probes.

The simulator's ``--batch-nondeterminism=64`` makes every greedy token take its second choice (at
any batch size): verify's e2e answer probes fail ``e2e.answers_changed`` on that arm. The
thirteenth hostile pass: the investigation reproduced it and named the suspect, then ``case test``
stopped, "arm --batch-nondeterminism=64 is not live (e2e router: e2e.answers_changed): arm not
measured", exit 1, nothing decided: the arm check rejected the very symptom the test measures.
An answers test now takes such an arm as live; its progress says the unset arm is "the engine
default", never "None" (real simulated workers, the real router, the real CLI).
"""

from __future__ import annotations

import asyncio
import json
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

KNOB = "--batch-nondeterminism"
TARGET = f"knob:decode/{KNOB}"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LoadedSpec]:
    spec = write_pd_spec(tmp_path, time_scale=0.2, name="nondet", knobs=(DEFAULT_KNOB, KNOB),
                         decode_env="SGLANG_ARGS=\n")  # fmt: skip
    spec.write_text(spec.read_text().replace(
        'depends_on = ["prefill"]\n', 'depends_on = ["prefill"]\nargs_env = "SGLANG_ARGS"\n', 1
    ))  # fmt: skip
    loaded = load_spec(spec)
    with deployed(loaded):
        yield loaded


async def _changed(stack: LoadedSpec, ledger: Ledger) -> int:
    assert (await verify(stack, ledger=ledger)).ok
    async with Operation(stack, ledger=ledger) as op:
        await set_knob(op, "decode", KNOB, "64", reason="perf")
        await deploy.restart(op, ["decode"], verify_after=False)
    return cases.open_case(ledger, "answers changed")


@pytest.mark.timeout(900)
def test_an_answers_test_decides_a_suspect_whose_verify_probes_change(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger_file = tmp_path / "ledger.db"
    with Ledger.open(ledger_file) as ledger:
        cid = asyncio.run(_changed(stack, ledger))
    led, spec = ("--ledger", str(ledger_file)), ("-f", stack.source)
    done = run_cli("investigate", "--symptom", "answers", "--case", str(cid), "--yes", "--json",
                   "--requests", "200", "--input-len", "32", "--output-len", "16", *spec, *led,
                   timeout=850)  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    assert "is not live" not in done.stderr, done.stderr
    assert "against None" not in done.stderr and "(None)" not in done.stderr, done.stderr
    state = json.loads(done.stdout)["state"]
    assert state["reproduced"] is True
    (decided,) = state["decided"]
    assert (decided["target"], decided["outcome"], decided["by"]) == (
        TARGET, "convicted", "case test")  # fmt: skip
    assert asyncio.run(get_knob(stack, "decode", KNOB)) is None  # left reverted
