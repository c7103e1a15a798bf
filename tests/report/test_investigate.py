"""The words of ``servelab investigate``: every event and action worded, the incident report."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from servelab.core.case.abtest import AbTestPoint, AbTestRecord
from servelab.core.case.model import TimelineEntry
from servelab.core.case.record import CaseEvent
from servelab.core.case.revert import ConcurrencyCost
from servelab.core.investigate.events import (
    BudgetSpent,
    ExperimentRestarts,
    ExperimentStarted,
    InvestigateEvent,
    Localized,
    Reproduced,
    Resumed,
    SlowMeasured,
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
    SlowTest,
)
from servelab.core.investigate.slow import Slowdown, SlowPoint, SmallBaseline
from servelab.core.investigate.state import (
    Decided,
    Ending,
    InvestigationState,
    Side,
    Stage,
    SuspectChange,
    Symptom,
    read_state,
)
from servelab.core.ledger.codec import encode
from servelab.ops.investigate.run import InvestigateOutcome
from servelab.report.docs import describe_timeline_entry
from servelab.report.investigate import (
    describe_action,
    describe_event,
    describe_restarts,
    investigate_lines,
    report_markdown,
)
from servelab.report.investigation import (
    describe_ab_test,
    describe_investigation,
    describe_state,
    root_cause,
)

K = "SGLANG_SM120_MMA_TARGET_CTAS"
KNOB = SuspectChange("decode", K, "256", "512", "256", (2, 3), reverted=True, ab_id=4,
                     bought=(ConcurrencyCost(64, -0.113, (-0.15, -0.08), "worse"),))  # fmt: skip
SLOW = Slowdown((3, 4, 5), "2026-01-01T00:00:00.000Z", "good",
                (SlowPoint(64, 0.8, 0.7, 0.9, "worse", 3, 3),))  # fmt: skip
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
        (SlowMeasured(None), "no baseline recorded: run `servelab bench` when it is good"),
        (SlowMeasured(SLOW), "against baseline bench 'good' (runs #3, #4, #5, 2026-01-01T00:00): "
                             "slower: C64 now/baseline 0.800 [0.700, 0.900] (Fieller 95%, n=3/3)"),
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
     (SlowTest(KNOB), "ab of knob:decode/SGLANG_SM120_MMA_TARGET_CTAS (512 against 256)"),
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


def test_a_declined_experiment_says_so_and_what_it_would_do_next() -> None:
    declined = InvestigateOutcome(STATE, stopped=True, declined=True)
    lines = investigate_lines(declined, "case test knob:x")
    assert lines[-1] == ("  stopped: the experiment's restarts were declined; next: case test "
                         "knob:x (--resume --case 7)")  # fmt: skip
    asked = ExperimentRestarts("ab", (KNOB.target,), ("decode", "router"))
    assert describe_restarts(asked).startswith(f"ab of {KNOB.target}: co-restarts decode → router")


def test_an_unmeasured_cleared_and_restored_change_offers_the_ab_that_measures_it() -> None:
    unmeasured = replace(KNOB, ab_id=None, bought=())
    state = replace(STATE, suspects=(unmeasured,))
    lines = investigate_lines(InvestigateOutcome(state), None, ("-f", "my spec.toml"))
    want = (
        f"not measured (no recorded A/B of decode {K} compares 512 with 256); measure it: "
        f"servelab ab -f 'my spec.toml' --knob decode:{K}=256,512"
    )
    assert f"  {KNOB.target}: cost of reverting it: {want}" in lines
    assert want in report_markdown(state, [], ("-f", "my spec.toml"))
    measured = investigate_lines(InvestigateOutcome(STATE), None, ("-f", "s.toml"))
    assert not any("measure it" in line for line in measured)  # an A/B is recorded: as is
    kept = investigate_lines(InvestigateOutcome(replace(state, restored=None)), None)
    assert not any("measure it" in line for line in kept)  # not restored: nothing offered


def test_each_recorded_state_is_worded_in_the_case_timeline_not_as_json() -> None:
    stored = CaseEvent(kind="investigate", at="t", detail=encode(STATE), id=3, case_id=7)
    assert read_state(stored) == STATE
    line = describe_investigation(read_state(stored))
    assert line == ("investigate (sessions hang): component:proxy (by experiment); localized to "
                    "the client-side proxy in front of the router; component:proxy convicted by "
                    "case test; knob:decode/SGLANG_SM120_MMA_TARGET_CTAS exonerated by case "
                    "test; restore plan carried out, verified live")  # fmt: skip
    early = replace(STATE, stage=Stage.LOCALIZE, symptom=Symptom.SLOW, slowdown=SLOW, decided=(),
                    restored=None, ending=None)  # fmt: skip
    assert describe_investigation(early).startswith("investigate (slower): next: localize; "
                                                    "against baseline bench 'good'")  # fmt: skip
    test = AbTestRecord(7, KNOB.target, "512", "256", 9, 1.25,
                        (AbTestPoint(64, 1.3, 1.2, 1.4, "better"),), "convicted")  # fmt: skip
    entry = TimelineEntry("t", "investigate", encode(STATE))  # as the case page reads it
    assert describe_timeline_entry(entry) == line
    ab_entry = TimelineEntry("t", "ab_test", encode(test))
    assert describe_timeline_entry(ab_entry) == describe_ab_test(test)
    with pytest.raises(ValueError, match="not an investigation"):
        read_state(replace(stored, kind="revert"))
    assert describe_ab_test(test).startswith(f"ab test {KNOB.target} (512 against 256, A/B #9): "
                                             "CONVICTED; C64 revert/change 1.300")  # fmt: skip


def test_an_inconclusive_slowdown_and_a_baseline_too_small_are_said_so() -> None:
    """Issue 38, sixteenth pass (M4): an inconclusive comparison was headlined "did not
    reproduce"; a baseline too small to compare with was used without a word."""
    small = SmallBaseline((9,), "2026-02-01T00:00:00.000Z", 1, 1, 16)
    undecided = Slowdown((3, 4, 5), "2026-01-01T00:00:00.000Z", "good",
                         (SlowPoint(16, 1.1, math.nan, math.nan, "inconclusive", 3, 1),),
                         skipped=(small,))  # fmt: skip
    state = InvestigationState(7, Symptom.SLOW, stage=Stage.DONE, reproduced=False,
                               slowdown=undecided, ending=Ending.INCONCLUSIVE)  # fmt: skip
    cause = root_cause(state)
    assert cause.startswith("inconclusive (slower): against baseline bench 'good'"), cause
    assert "did not reproduce" not in cause and "measure again" in cause
    assert "passed over, too small to compare with: bench runs #9 (2026-02-01T00:00: 1 run(s) " \
        "at a level, 1 request(s) a run at C16)" in cause  # fmt: skip
    assert "inconclusive" in describe_state(state) and "did not" not in describe_state(state)
    page = report_markdown(state, [])
    assert "- reproduction: inconclusive" in page and "did not reproduce" not in page
    none = replace(state, slowdown=None, ending=Ending.NO_BASELINE, small_baselines=(small,))
    said = describe_state(none)
    assert "no usable baseline: bench runs #9" in said and "too small to compare with" in said
    assert "at least 2 runs a level (`--repeat`)" in said, said
    assert "no usable baseline" in describe_event(SlowMeasured(None, (small,)))
    assert describe_event(SlowMeasured(None)).endswith("run `servelab bench` when it is good")
