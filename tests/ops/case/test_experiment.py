"""``case test`` against a real stack: sim prefill + decode, the real sglang-router, and the
simulated client-side proxy that stalls every connection after it carried two requests.

The fault is in the proxy: the decode knob is innocent. Its experiment (each arm set, co-restarted
through the router and proven live) exonerates it, a conviction is then refused, and the knob is
left as it was found. Bypassing the proxy (straight to the router) convicts the proxy.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from servelab.core.case.experiment import CONVICTED, EXONERATED, RULE_BOUND, RULE_SIGNIFICANT
from servelab.core.case.verdicts import WHY_EXPERIMENT_CONTRADICTS
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.progress import ProgressEvent
from servelab.core.soak.result import SoakConfig, Targets
from servelab.errors import CaseError
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.case import case as cases
from servelab.ops.case import experiment as casetest
from servelab.ops.knob import get_knob, live_knob, live_knobs
from servelab.ops.soak.soak import soak
from servelab.report.case import describe_experiment, experiment_lines
from servelab.report.progress import describe_progress
from tests.support.deployed import deployed
from tests.support.history import K, seed_history
from tests.support.specs import write_pd_spec

KNOB = f"knob:decode/{K}"
#: The failing workload: three sessions of three rounds; the proxy stalls every third request.
WORKLOAD = SoakConfig(sessions=3, rounds=3, idle_timeout_s=1.5, duration_s=40, localize=False)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    """One stack for the module: an experiment leaves the knob as it found it, and bypassing the
    proxy restarts nothing."""
    spec = write_pd_spec(
        tmp_path_factory.mktemp("case-test"), time_scale=0.02, name="case-test",
        proxy_args=["--stall-reused-after", "2"],
    )  # fmt: skip
    with deployed(load_spec(spec)) as loaded:
        yield loaded


async def _failing_case(stack: LoadedSpec, ledger: Ledger, suspect: str) -> int:
    seed_history(ledger)  # the change 256 → 512 the revert goes back on
    cid = cases.open_case(ledger, "agentic sessions hang after two rounds")
    cases.add_suspect(ledger, cid, suspect, "the latest change")
    spec = stack.spec
    targets = Targets(spec.services["proxy"].url, spec.services["router"].url)
    config = replace(WORKLOAD, knobs=await live_knobs(stack))
    found = await soak(config, targets, ledger=ledger, case_id=cid)
    assert not found.ok and found.stalls
    return cid


@pytest.mark.timeout(400)
async def test_the_innocent_knob_is_exonerated_and_its_conviction_refused(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        cid = await _failing_case(stack, ledger, KNOB)
        said: list[str] = []
        started = time.monotonic()

        def note(event: ProgressEvent) -> None:
            line = describe_progress(event)
            said.append(line)
            print(f"{time.monotonic() - started:7.1f}  {line}", flush=True)

        cfg = casetest.CaseTestConfig(cid, KNOB, rounds=2)
        outcome = await casetest.run_case_test(stack, ledger, cfg, progress=note)
        wall = time.monotonic() - started
        record = outcome.record
        print(f"case test {KNOB}: {wall:.1f} s wall", *experiment_lines(record), sep="\n")
        assert (record.suspect_value, record.revert_value) == ("512", "256")
        assert [v.arm for v in record.visits] == ["suspect", "revert", "revert", "suspect"]
        assert [v.value for v in record.visits] == ["512", "256", "256", "512"]
        assert all(v.verification_id is not None and v.soak_id is not None for v in record.visits)
        assert (record.suspect.failed, record.suspect.sessions) == (6, 6)
        assert (record.revert.failed, record.revert.sessions) == (6, 6)
        assert (record.outcome, record.decision.rule) == (EXONERATED, RULE_BOUND)
        assert record.decision.p_value == pytest.approx(1.0)
        assert record.decision.interval[1] < 0.5
        assert "EXONERATED" in describe_experiment(record)
        assert any("co-restart decode → router → proxy" in line for line in said), said
        assert any("verified live" in line for line in said)
        # left as found, live too; the arms' changes are not the case's (no restore plan)
        assert (record.found, record.left) == ("512", "512")
        assert await get_knob(stack, "decode", K) == "512"
        assert await live_knob(stack, "decode", K) == "512"
        assert ledger.list(KnobChangeRecord, case_id=cid) == []
        # recorded on the case as typed evidence
        case = cases.load_case(ledger, cid)
        (evidence,) = [e for e in case.evidence if e.kind == "experiment"]
        assert evidence.id == outcome.evidence_id and evidence.ref_id == outcome.event_id
        (event,) = [e for e in case.events if e.kind == "experiment"]
        assert event.detail["outcome"] == EXONERATED
        # verdicts that hold
        with pytest.raises(cases.VerdictRefused) as refused:
            cases.resolve_case(ledger, cid, "the knob", convict=[KNOB])
        assert f"#{evidence.id}" in str(refused.value)
        assert [(r.why, r.evidence_ids) for r in refused.value.refused] == [
            (WHY_EXPERIMENT_CONTRADICTS, (evidence.id,))
        ]
        assert isinstance(refused.value, CaseError)  # exit 2 at the CLI
        view = cases.resolve_case(ledger, cid, "the proxy", exonerate=[KNOB])
        assert view.case.verdict(KNOB) == "exonerated" and view.plan == []


async def test_a_proxy_is_tested_by_bypassing_it(stack: LoadedSpec, tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        cid = await _failing_case(stack, ledger, "component:proxy")
        cases.add_suspect(ledger, cid, "component:router", "it is in the path")
        with pytest.raises(CaseError, match="cannot be bypassed"):
            await casetest.run_case_test(
                stack, ledger, casetest.CaseTestConfig(cid, "component:router", rounds=1)
            )
        with pytest.raises(CaseError, match="not a suspect"):
            await casetest.run_case_test(stack, ledger, casetest.CaseTestConfig(cid, KNOB))
        started = time.monotonic()
        cfg = casetest.CaseTestConfig(cid, "component:proxy", rounds=2)
        outcome = await casetest.run_case_test(stack, ledger, cfg)
        print(f"case test component:proxy: {time.monotonic() - started:.1f} s wall")
        record = outcome.record
        spec = stack.spec
        assert record.suspect_value == spec.services["proxy"].url
        assert record.revert_value == spec.services["router"].url
        assert (record.suspect.failed, record.revert.failed) == (6, 0)
        assert (record.outcome, record.decision.rule) == (CONVICTED, RULE_SIGNIFICANT)
        assert record.decision.p_value < 0.05 and record.decision.interval[0] > 0
        assert all(v.verification_id is None for v in record.visits)  # nothing restarted
        with pytest.raises(cases.VerdictRefused, match=f"#{outcome.evidence_id}"):
            cases.resolve_case(ledger, cid, "x", exonerate=["component:proxy"])
        view = cases.resolve_case(ledger, cid, "the proxy", convict=["component:proxy"])
        assert view.case.verdict("component:proxy") == "convicted"


async def test_a_case_without_a_failing_soak_has_nothing_to_replay(tmp_path: Path) -> None:
    loaded = load_spec(write_pd_spec(tmp_path, name="no-soak"))
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        cid = cases.open_case(ledger, "hang")
        cases.add_suspect(ledger, cid, KNOB, "latest")
        with pytest.raises(CaseError, match="no failing soak"):
            await casetest.run_case_test(loaded, ledger, casetest.CaseTestConfig(cid, KNOB))
    with pytest.raises(CaseError, match="rounds"):
        casetest.CaseTestConfig(cid, KNOB, rounds=0)
