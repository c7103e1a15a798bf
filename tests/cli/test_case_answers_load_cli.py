"""``case test --test answers`` that never reached the load the wrong answers need: not shown.

The simulator's bf16 index keys alter answers only in decode steps over 16 running requests. The
case records (an earlier answers test's evidence) that its wrong answers were seen at 24 running
requests on the decode. A test at C4 cannot push the decode past 4; the decode also flips greedy
tokens with the batch (``batch_nondeterminism``), so both arms differ from the references alike,
which the rule alone reads as "exonerated". The load guard makes it "not shown" and says why.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.case.experiment import (
    ARM_SUSPECT,
    EXONERATED,
    ArmTally,
    ExperimentRecord,
    ExperimentVisit,
    decide,
)
from servelab.core.case.reached import LoadSource, ReachedLoad
from servelab.core.case.record import CaseEvent, CaseEvidence
from servelab.core.ledger.codec import decode, encode
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.case import case as cases
from servelab.ops.context import Operation
from servelab.ops.deploy import deploy
from servelab.ops.knob import set_knob
from tests.support import run_cli
from tests.support.deployed import deployed
from tests.support.specs import write_pd_spec

BF16 = "SGLANG_NSA_INDEX_KEYS_BF16"
TARGET = f"knob:decode/{BF16}"
#: where the case's wrong answers were seen (its earlier experiment's suspect visit)
SEEN_AT = 24.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    root = tmp_path_factory.mktemp("answersload")
    spec = write_pd_spec(root, time_scale=0.05, name="answersload", knobs=(BF16,),
                         decode_env="SERVELAB_SIM_BATCH_NONDETERMINISM=16\n",
                         decode_toml=f'reads_env = ["{BF16}"]\n')  # fmt: skip
    loaded = load_spec(spec)
    with deployed(loaded):
        yield loaded


def _seen_at(ledger: Ledger, case_id: int, peak: float) -> int:
    """An earlier answers test on the case whose suspect arm saw wrong answers at ``peak``."""
    seen = ExperimentVisit(0, ARM_SUSPECT, "1", 21, 5, None, None, 1.0,
                           ReachedLoad(LoadSource.ENGINE, peak, peak - 2, 12,
                                       "sglang:num_running_reqs"))  # fmt: skip
    record = ExperimentRecord(case_id=case_id, target=TARGET, visits=(seen,))
    event = ledger.add(CaseEvent(at=NOW, case_id=case_id, kind=ExperimentRecord.KIND,
                                 detail=encode(record)))  # fmt: skip
    return ledger.add(CaseEvidence(at=NOW, case_id=case_id, kind=ExperimentRecord.KIND,
                                   ref_id=event, note="earlier test"))  # fmt: skip


async def _set(stack: LoadedSpec, value: str) -> None:
    async with Operation(stack) as op:
        await set_knob(op, "decode", BF16, value, reason="the suspect in place")
        await deploy.restart(op, ["decode"])


@pytest.mark.timeout(400)
def test_a_test_below_the_load_is_not_shown(stack: LoadedSpec, tmp_path: Path) -> None:
    ledger_file = tmp_path / "ledger.db"
    with Ledger.open(ledger_file) as ledger:
        cid = cases.open_case(ledger, "broken tool calls at high concurrency")
        cases.add_suspect(ledger, cid, TARGET, "changed last")
        evidence = _seen_at(ledger, cid, SEEN_AT)
    asyncio.run(_set(stack, "1"))
    done = run_cli("case", "test", str(cid), TARGET, "--to", "0", "--test", "answers@C4",
                   "--rounds", "1", "--runs", "1", "--requests", "400", "--input-len", "32",
                   "--output-len", "16", "-f", str(stack.source), "--ledger", str(ledger_file),
                   "--json", timeout=380)  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    doc = json.loads(done.stdout)
    suspect, revert = decode(ArmTally, doc["suspect"]), decode(ArmTally, doc["revert"])
    # the rule alone: both arms differ from the references alike, an exoneration
    assert decide(suspect, revert).outcome == EXONERATED, doc
    assert doc["outcome"] == "not_shown" and doc["decision"]["rule"] == "load_not_reached"
    load = doc["load"]
    assert load["reference"] == {"level": SEEN_AT, "source": "case_evidence",
                                 "evidence_id": evidence}  # fmt: skip
    reached = load["reached"]
    assert reached["source"] == "engine_running_gauge", load
    assert reached["series"] == "sglang:num_running_reqs"
    assert 1 <= reached["peak"] <= 4 and load["enough"] is False
    assert all(v["reached"]["peak"] <= 4 for v in doc["visits"])
    assert "the wrong answers were seen at 24" in doc["load_text"]
    assert "not shown — rerun with more load or less competing CPU" in doc["load_text"]
    refused = run_cli("case", "resolve", str(cid), "--root-cause", "x", "--convict", TARGET,
                      "--ledger", str(ledger_file))  # fmt: skip
    assert refused.returncode == 2, refused.stderr  # a test that was not shown supports nothing
