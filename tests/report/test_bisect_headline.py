"""``case bisect``'s headline names a change guilty only when the bisection proved it: a result not
shown 1-minimal (a change whose removal was probed undecided) says "not proven" and which change
was not shown needed, in the headline and in the case's timeline (tenth pass)."""

from __future__ import annotations

from servelab.core.case.bisect import Bisected, Change, ProbeOutcome
from servelab.core.case.probe import BisectConclusion, BisectRecord, bisect_verdicts
from servelab.core.ledger.codec import decode, encode
from servelab.report.case import describe_bisect_event, describe_bisected

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
    assert "but SGLANG_SM120_MLA_KV_TILE not shown needed (removing it was undecided)" in line
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
