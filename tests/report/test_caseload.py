"""The reached load of an answers test, in one line."""

from __future__ import annotations

from servelab.core.case.experiment import CONVICTED, EXONERATED, NOT_SHOWN, Decision
from servelab.core.case.load import case_reference, check_load
from servelab.core.case.reached import (
    LoadCheck,
    LoadReference,
    LoadSource,
    ReachedLoad,
    ReferenceSource,
)
from servelab.report.caseload import describe_load, load_clause, probe_load


def test_not_shown_says_what_was_reached_against_what() -> None:
    check = LoadCheck(ReachedLoad(LoadSource.ENGINE, 9, 7, 14, "sglang:num_running_reqs"),
                      LoadReference(24, ReferenceSource.CASE, 3), False)  # fmt: skip
    assert describe_load(check, Decision(NOT_SHOWN)) == (
        "reached 9 running requests on the decode (sglang:num_running_reqs; median 7 over 14 "
        "samples); the wrong answers were seen at 24 (evidence #3): not shown — rerun with more "
        "load or less competing CPU"
    )
    assert load_clause(check) == "load 9 (24 needed)"
    assert describe_load(check, Decision(CONVICTED)).endswith(
        "below it, but wrong answers convict at any load"
    )


def test_the_client_witness_and_the_requested_reference_are_named() -> None:
    check = LoadCheck(ReachedLoad(LoadSource.CLIENT, 64, 60, 400),
                      LoadReference(64, ReferenceSource.REQUESTED), True)  # fmt: skip
    text = describe_load(check, Decision(EXONERATED))
    assert text.startswith("reached 64 requests in flight at the client (the decode's gauge did "
                           "not answer; median 60 over 400 samples)")  # fmt: skip
    reference = "the reference is half the requested concurrency, 64: reached"
    assert f"{reference}, so the verdict stands" in text
    unknown = LoadCheck(None, LoadReference(64, ReferenceSource.REQUESTED), False)
    assert describe_load(unknown, Decision(NOT_SHOWN)).startswith("reached an unknown load")
    assert load_clause(unknown) == "load unknown (64 needed)"


def test_a_probe_s_arm_below_its_bad_arm_s_load_is_not_shown_good() -> None:
    low = LoadCheck(ReachedLoad(LoadSource.ENGINE, 6, 5, 9, "vllm:num_requests_running"),
                    LoadReference(30, ReferenceSource.PROBE), False)  # fmt: skip
    assert probe_load(low) == (
        "its arm reached 6 running requests on the decode (vllm:num_requests_running; median 5 "
        "over 9 samples); the bad state's wrong answers in this probe were seen at 30 (75% of it "
        "needed): not shown good"
    )
    high = LoadCheck(ReachedLoad(LoadSource.ENGINE, 41, 38, 9, "vllm:num_requests_running"),
                     LoadReference(30, ReferenceSource.PROBE), True)  # fmt: skip
    assert probe_load(high) == "its arm reached the load (41; the bad arm's wrong answers at 30)"


def test_a_load_above_its_reference_is_not_said_as_a_count_above_its_total() -> None:
    """The thirteenth pass: an answers ``case test`` at C4 said "load 4 of 2" (4 reached, half
    the requested 4 needed): the numbers were right, the clause read as 4 out of a total of 2."""
    check = check_load(ReachedLoad(LoadSource.CLIENT, 4, 4, 12), case_reference([], [], 4))
    assert check.enough
    assert load_clause(check) == "load 4 (2 needed)"
    assert " of " not in load_clause(check)
