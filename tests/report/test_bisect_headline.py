"""``case bisect``'s headline names a change guilty only when the bisection proved it: a result not
shown 1-minimal (a change whose removal was probed undecided) says "not proven" and which change
was not shown needed, in the headline and in the case's timeline (tenth pass)."""

from __future__ import annotations

import re

from servelab.core.case.bisect import Bisected, Change, ProbeOutcome
from servelab.core.case.bisectevents import ProbeStarted
from servelab.core.case.experiment import ArmTally, decide
from servelab.core.case.probe import (
    ARM_BAD,
    ARM_PROBE,
    BisectConclusion,
    BisectRecord,
    ProbeRecord,
    bisect_verdicts,
)
from servelab.core.ledger.codec import decode, encode
from servelab.ops.case.bisect import BisectOutcome, change_label
from servelab.report.case import (
    bisect_lines,
    describe_bisect_event,
    describe_bisected,
)
from servelab.report.progress import describe_progress

GOOD, BAD, UNDECIDED = ProbeOutcome.GOOD, ProbeOutcome.BAD, ProbeOutcome.UNDECIDED

CHANGES = (Change("decode", "SGLANG_SM120_MLA_KV_TILE", None, "16"),
           Change("decode", "--enable-metrics", "off", "on"),
           Change("decode", "SGLANG_X", None, "1"))  # fmt: skip


def _end(result: Bisected) -> tuple[BisectRecord, BisectConclusion]:
    start = BisectRecord(3, CHANGES, good="verify:2", bad="now", rounds=3)
    return start, BisectConclusion(3, 40, result, bisect_verdicts(CHANGES, result), 4, 20.0)


def test_an_undecided_removal_is_not_proven_in_the_headline() -> None:
    # {0, 1} bad; without 0 undecided (not shown needed), without 1 good.
    result = Bisected((0, 1), CHANGES[:2], False, (0,), 3, 1)
    start, end = _end(result)
    line = describe_bisected(start, end)
    assert line.startswith("case bisect: not proven: bad with decode SGLANG_SM120_MLA_KV_TILE")
    said = "but decode:SGLANG_SM120_MLA_KV_TILE not shown needed (removing it was undecided)"
    assert said in line
    assert "guilty" not in line
    event = describe_bisect_event(decode(BisectConclusion, encode(end)))
    assert event.startswith("bisected: not proven: bad with") and "guilty" not in event


def test_a_proven_result_still_names_the_guilty_change() -> None:
    start, end = _end(Bisected((1,), CHANGES[1:2], True, (), 2, 0))
    assert describe_bisected(start, end).startswith(
        "case bisect: guilty decode --enable-metrics off → on (1-minimal)"
    )
    assert (
        describe_bisect_event(end)
        == "bisected: guilty decode --enable-metrics off → on in 2 probe(s)"
    )


TWIN = "SGLANG_SM120_MMA_TARGET_CTAS"
#: One knob name on two services: only the service tells the two changes apart.
TWINS = (Change("prefill", TWIN, "512", "384"), Change("decode", TWIN, "512", "384"),
         Change("decode", "--enable-metrics", "off", "on"))  # fmt: skip


def _unnamed(line: str) -> list[str]:
    """Each place ``line`` names a knob of :data:`TWINS` without its service before it (``decode
    KNOB``, ``decode:KNOB`` or the target ``knob:decode/KNOB``)."""
    knobs = "|".join(re.escape(k) for k in (TWIN, "--enable-metrics"))
    named = r"(?:(?:prefill|decode)[ :]|knob:(?:prefill|decode)/)"
    return [
        m.group(0)
        for m in re.finditer(rf"(?<![\w/:-])(.{{0,16}})({knobs})", line)
        if not re.search(rf"{named}$", m.group(1))
    ]


def test_every_line_of_a_bisection_names_the_service_of_each_change() -> None:
    """22nd pass: a change was worded ``KNOB=384`` (a probe's changes) or ``KNOB not shown needed``
    where the ledger knows ``decode:KNOB``; with one knob name on two services the report could
    not say which service's change it meant."""
    bad, probe = ArmTally(ARM_BAD, None, 8, 8), ArmTally(ARM_PROBE, None, 8, 0)
    probes = (ProbeRecord(3, 40, 1, (1, 2), ProbeOutcome.BAD, 1, bad, bad, decide(bad, bad)),
              ProbeRecord(3, 40, 2, (1,), ProbeOutcome.UNDECIDED, 3, bad, probe,
                          decide(bad, probe)))  # fmt: skip
    result = Bisected((1, 2), TWINS[1:], False, (1,), 2, 1)
    start = BisectRecord(3, TWINS, good="verify:2", bad="now", rounds=3)
    end = BisectConclusion(3, 40, result, bisect_verdicts(TWINS, result), 8, 30.0)
    outcome = BisectOutcome(40, start, probes, end, 42, 9, ("384", "384", "on"))
    lines = [*bisect_lines(outcome), describe_bisected(start, end)]
    lines += [describe_bisect_event(e) for e in (start, end)]
    assert "the good state with decode:SGLANG_SM120_MMA_TARGET_CTAS=384, " in lines[4], lines
    assert "but decode:SGLANG_SM120_MMA_TARGET_CTAS not shown needed" in lines[-3], lines
    for line in lines:
        assert _unnamed(line) == [], line
    # a probe's progress (and its runs' labels) names them as the report does
    said = describe_progress(ProbeStarted(2, tuple(change_label(c) for c in TWINS[1:])))
    assert said == (f"probe 2: the good state with decode:{TWIN}=384, decode:--enable-metrics=on "
                    "against the bad state")  # fmt: skip
    assert _unnamed(said) == []


def test_a_good_state_not_probed_good_convicts_nothing_and_says_why() -> None:
    """Issue 38: the good state's probe (the first) not good: no change named, no verdict, and the
    reason (not these changes / did not reproduce / not proven), the timeline's line alike; an
    older record (no ``reproduced``, no ``good_state``) reads as it did."""
    start = BisectRecord(3, CHANGES, rounds=3)
    cases = [(BAD, None, "fails without any of the changes: not these changes"),
             (UNDECIDED, False, "did not reproduce: the bad state never failed the test"),
             (UNDECIDED, True, "not proven: the bad state was not shown to fail more")]  # fmt: skip
    for good_state, reproduced, why in cases:
        result = Bisected((), (), False, (), 1, int(good_state is UNDECIDED), good_state=good_state)
        assert bisect_verdicts(CHANGES, result) == ()
        end = BisectConclusion(3, 40, result, (), 2, 9.0, reproduced)
        line = describe_bisected(start, end)
        assert line.startswith(f"case bisect: {why}") and "after 1 probe(s) over 3" in line
        assert "guilty" not in line and "nothing convicted" in line
        event = describe_bisect_event(decode(BisectConclusion, encode(end)))
        assert event.startswith(f"bisected: {why}")
    old = encode(_end(Bisected((1,), CHANGES[1:2], True, (), 2, 0))[1])
    assert "reproduced" not in old and old["result"]["good_state"] == "good"
    del old["result"]["good_state"]
    assert decode(BisectConclusion, old).result.good_state is GOOD
