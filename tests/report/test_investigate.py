"""The words of ``servelab investigate``: every event and action worded, the incident report."""

from __future__ import annotations

import pytest

from servelab.core.case.revert import ConcurrencyCost
from servelab.core.investigate.events import (
    BudgetSpent,
    ExperimentStarted,
    InvestigateEvent,
    Localized,
    Reproduced,
    Resumed,
    StageStarted,
    SuspectsListed,
    Verdict,
)
from servelab.core.investigate.plan import (
    Action,
    Bisect,
    ComponentTest,
    Finish,
    GoodState,
    KnobTest,
    ListSuspects,
    Localize,
    Reproduce,
    Resolve,
)
from servelab.core.investigate.state import (
    Decided,
    Ending,
    InvestigationState,
    Side,
    Stage,
    SuspectChange,
    Symptom,
)
from servelab.ops.investigate.run import InvestigateOutcome
from servelab.report.investigate import (
    describe_action,
    describe_event,
    investigate_lines,
    report_markdown,
)

K = "SGLANG_SM120_MMA_TARGET_CTAS"
KNOB = SuspectChange("decode", K, "256", "512", "256", (2, 3), reverted=True, ab_id=4,
                     bought=(ConcurrencyCost(64, -0.113, (-0.15, -0.08), "worse"),))  # fmt: skip
STATE = InvestigationState(
    7, Symptom.HANG, upto_change_id=3, since="verify:1", since_at="2026-01-01T00:00:00.000Z",
    stage=Stage.DONE, reproduced=True, soak_id=5, layer="client_proxy", side=Side.OUTSIDE,
    component="proxy", verification_id=6, suspects=(KNOB,),
    decided=(Decided("component:proxy", "convicted", "case test", 10, 11, 0.0286),
             Decided(KNOB.target, "exonerated", "case test", 12, 13, 1.0)),
    restored=True, restore_verification_id=14, ending=Ending.RESOLVED,
)  # fmt: skip


@pytest.mark.parametrize(
    ("event", "words"),
    [
        (StageStarted(Stage.DECIDE, 7), "investigate case 7: decide"),
        (Resumed(7, Stage.LOCALIZE, 0), "resumed at localize"),
        (Reproduced(True, 5, 4, 4), "reproduced: 4 of 4 failed (soak #5)"),
        (Reproduced(False, 5, 0, 4), "did not reproduce"),
        (Localized("client_proxy", None, Side.OUTSIDE, 6), "client-side proxy"),
        (Localized("engine_wedge", "decode", Side.INSIDE, 6), "a wedged engine (decode)"),
        (SuspectsListed("verify:1", (KNOB,)), "256 → 512 (reverted on suspicion)"),
        (ExperimentStarted("bisect", ("a", "b")), "bisect: a, b"),
        (Verdict("t", "convicted", 0.01), "t: convicted (p=0.01)"),
        (BudgetSpent(1.5, Stage.DECIDE, None), "stopped before decide"),
    ],
)  # fmt: skip
def test_every_event_is_worded(event: InvestigateEvent, words: str) -> None:
    assert words in describe_event(event)


@pytest.mark.parametrize(
    ("action", "words"),
    [(Reproduce(), "reproduce"), (Localize(), "localize"), (ListSuspects(), "verify:1"),
     (ComponentTest("component:proxy"), "bypassing"), (KnobTest(KNOB), "512 against 256"),
     (Bisect((KNOB, KNOB)), "over 2 changes"), (Resolve(), "restore"),
     (GoodState((KNOB,)), "the good state"),
     (Finish(Ending.RESOLVED), "resolved")],
)  # fmt: skip
def test_every_action_is_worded(action: Action, words: str) -> None:
    assert words in describe_action(action, STATE)


def test_the_closing_lines_and_the_incident_report() -> None:
    lines = investigate_lines(InvestigateOutcome(STATE), None)
    assert lines[0] == ("case 7: component:proxy (by experiment); localized to the client-side "
                        "proxy in front of the router")  # fmt: skip
    assert "  component:proxy: convicted by case test, p=0.0286 (evidence #11)" in lines
    assert any("restored and verified live (verify #14)" in line for line in lines)
    report = report_markdown(STATE, ["perf-plan.md", "cases/case-7.md"])
    assert "| component:proxy | localized | convicted | convicted by case test" in report
    assert f"| {KNOB.target} | decode {K} 256 → 512 (reverted on suspicion) | exonerated" in report
    assert "-11.3% at C64" in report.replace("−", "-") or "11.3" in report
    assert "- cases/case-7.md" in report and "A/B #4" in report


def test_a_stopped_investigation_says_what_it_would_do_next() -> None:
    stopped = InvestigateOutcome(STATE, stopped=True)
    lines = investigate_lines(stopped, "case test component:proxy")
    assert lines[-1] == ("  stopped by --max-minutes; next: case test component:proxy "
                         "(--resume --case 7)")  # fmt: skip
