"""``servelab case test`` through the CLI on a real stack: the guilty knob.

``SGLANG_SM120_MLA_KV_TILE=16`` (the simulator's long-context fault) makes every prompt over
16 x 64 = 1024 tokens hang in decode; the agentic sessions grow past that in their fourth round.
Reverted under suspicion (unset: auto), the experiment — the failing soak with 16 and without it,
each arm set, co-restarted through the real router and proven live — convicts it; an exoneration
is refused naming the experiment's evidence id, the conviction holds, and ``restore`` leaves it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.soak.result import SoakConfig, Targets
from servelab.core.verify.checks import CheckCode
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.case import case as cases
from servelab.ops.knob import get_knob, live_knobs
from servelab.ops.soak.soak import soak
from tests.support import run_cli
from tests.support.deployed import deployed
from tests.support.e2ewait import e2e_waited
from tests.support.specs import write_pd_spec

TILE = "SGLANG_SM120_MLA_KV_TILE"
TARGET = f"knob:decode/{TILE}"
WORKLOAD = SoakConfig(
    sessions=4, rounds=4, turn_words=300, idle_timeout_s=1.5, duration_s=60, localize=False
)


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LoadedSpec]:
    spec = write_pd_spec(
        tmp_path, time_scale=0.02, name="guilty-knob", knobs=(DEFAULT_KNOB, TILE),
        decode_env=f"{TILE}=16\n",
    )  # fmt: skip
    loaded = load_spec(spec)
    with deployed(loaded):
        yield loaded


def _json(*args: str, code: int = 0) -> Any:
    done = run_cli(*args, "--json", timeout=600)
    assert done.returncode == code, done.stderr + done.stdout
    return json.loads(done.stdout)


async def _reverted_case(stack: LoadedSpec, ledger: Ledger) -> int:
    """The incident: the tile pinned (recorded), sessions hang, the knob reverted on suspicion."""
    ledger.add(
        KnobChangeRecord(
            id=0, at=NOW, service="decode", name=TILE, old=None, new="16", reason="faster decode"
        )
    )
    cid = cases.open_case(ledger, "long agentic sessions hang")
    cases.add_suspect(ledger, cid, TARGET, "the latest change")
    targets = Targets(stack.spec.services["router"].url, stack.spec.services["router"].url)
    config = replace(WORKLOAD, knobs=await live_knobs(stack))
    failing = await soak(config, targets, ledger=ledger, case_id=cid)
    assert not failing.ok and failing.stalls
    preview = cases.revert_preview(ledger, cid, TARGET, current="16")
    assert (await cases.revert(stack, ledger, preview)).ok
    return cid


@pytest.mark.timeout(900)
def test_the_guilty_knob_is_convicted_and_stays_reverted(stack: LoadedSpec, tmp_path: Path) -> None:
    ledger_file = tmp_path / "ledger.db"
    with Ledger.open(ledger_file) as ledger:
        cid = asyncio.run(_reverted_case(stack, ledger))
    led, spec, case = ("--ledger", str(ledger_file)), ("-f", stack.source), str(cid)
    started = time.monotonic()
    done = run_cli("case", "test", case, TARGET, "--rounds", "1", *spec, *led, "--json",
                   timeout=600)  # fmt: skip
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    print(f"case test {TARGET}: {wall:.1f} s wall\n{doc['summary']}")
    assert (doc["suspect_value"], doc["revert_value"]) == ("16", None)
    assert [v["arm"] for v in doc["visits"]] == ["suspect", "revert"]
    assert (doc["suspect"]["failed"], doc["suspect"]["sessions"]) == (4, 4)
    assert (doc["revert"]["failed"], doc["revert"]["sessions"]) == (0, 4)
    assert doc["outcome"] == "convicted" and doc["decision"]["p_value"] < 0.05
    assert doc["decision"]["test"] == "Fisher's exact test (two-sided)"
    assert (doc["found"], doc["left"]) == (None, None)  # left as found: reverted
    assert "visit 1/2: arm suspect" in done.stderr and "verified live" in done.stderr
    # the guilty tile fails verify's long prompt too: the arm is measured, and that is said
    assert "its long prompt failed (e2e.long_failed)" in done.stderr, done.stderr
    assert asyncio.run(get_knob(stack, "decode", TILE)) is None

    refused = run_cli("case", "resolve", case, "--root-cause", "the proxy", "--exonerate", TARGET,
                      *led)  # fmt: skip
    assert refused.returncode == 2
    assert f"contradicted by evidence #{doc['evidence_id']}" in refused.stderr
    resolved = _json("case", "resolve", case, "--root-cause", "the pinned MLA KV tile",
                     "--convict", TARGET, *led)  # fmt: skip
    assert resolved["restore_plan"] == [] and resolved["restore_status"] == "nothing to restore"
    left = run_cli("restore", case, *spec, *led)
    assert left.returncode == 2 and "nothing to restore" in left.stderr
    assert asyncio.run(get_knob(stack, "decode", TILE)) is None  # restore leaves it
    # the suspect arm's long prompt never answers: failed at the workload's bound (8 x 1.5 s),
    # not after verify's 120 s
    code, waited = e2e_waited(ledger_file, doc["visits"][0]["verification_id"])
    assert code is CheckCode.E2E_LONG_FAILED and waited < 60, (code, waited)
