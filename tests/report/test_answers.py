"""Answers where people look: the perf plan's headline (``answers unchanged: 0 of 60 against 0 of
60``), the refusal ``ab`` prints, and the HTML page with a differing answer beside its reference,
escaped."""

from __future__ import annotations

from dataclasses import replace

from servelab.core.ab.compare import Comparison, Verdict
from servelab.core.ab.result import AbResult, NotKept, better_arm, kept_value, not_kept
from servelab.core.answers.answer import Failure
from servelab.core.answers.contract import AnswersMode, AnswersUnchecked, ArmAnswers, Example
from servelab.core.answers.judge import AnswersJudgement
from servelab.core.answers.rule import decide_answers
from servelab.report.ab import ab_markdown, headline, not_kept_phrase
from servelab.report.answers import answers_refusal, safe_text, unchecked_phrase
from servelab.report.pages import markdown_html

HOSTILE = "<script>alert(1)</script> | `x` \n next"


def _judged(wrong: int, mode: AnswersMode = AnswersMode.GATE) -> AnswersJudgement:
    verdict = decide_answers([(True, False)] * wrong + [(False, False)] * (60 - wrong))
    example = Example(4, 64, HOSTILE, "the reference", (Failure.TOOL_JSON,))
    base = ArmAnswers("256", 60, 0, 0, (), 20, 20, 1.0)
    cand = ArmAnswers("512", 60, wrong, wrong, ((Failure.TOOL_JSON, wrong),), 20, 20, 0.9,
                      (example,) if wrong else ())  # fmt: skip
    return AnswersJudgement(mode, base, cand, verdict, "k", 1, 60, 1200)


def _result(wrong: int, mode: AnswersMode = AnswersMode.GATE) -> AbResult:
    faster = Comparison(64, 1.128, (1.08, 1.17), Verdict.BETTER, "256", "512")
    return AbResult("decode", "K", "256", "512", comparisons=(faster,),
                    answers=_judged(wrong, mode))  # fmt: skip


def test_the_headline_says_answers_unchanged() -> None:
    assert headline(_result(0)).endswith(
        "+12.8% at C64, answers unchanged: 0 of 60 against 0 of 60"
    )
    assert better_arm(_result(0)) == "512"


def test_a_faster_candidate_that_changes_answers_is_refused_and_never_better() -> None:
    result = _result(12)
    assert result.answers is not None and result.answers.gates
    assert better_arm(result) is None
    said = answers_refusal(result)
    assert said.startswith("faster by 12.8% but changes answers: 20.0% [")
    assert "against 0.0% for the baseline" in said
    assert better_arm(_result(12, AnswersMode.CHECK)) == "512"  # check: shown, not gating
    # the tenth hostile pass: `--keep candidate` kept it live while saying "not kept"
    assert kept_value("candidate", result) is None and kept_value("512", result) is None
    assert kept_value("0512", result) is None  # another spelling of the candidate: refused too
    assert kept_value("baseline", result) == "256"
    assert kept_value("candidate", _result(12, AnswersMode.CHECK)) == "512"


def _few(wrong: int, pairs: int, mode: AnswersMode = AnswersMode.GATE) -> AbResult:
    verdict = decide_answers([(True, False)] * wrong + [(False, False)] * (pairs - wrong))
    base = ArmAnswers("256", pairs, 0, 0, (), 0, 0, 1.0)
    cand = ArmAnswers("512", pairs, wrong, wrong, (), 0, 0, 1.0)
    judged = AnswersJudgement(mode, base, cand, verdict, "k", 1, pairs, 100)
    faster = Comparison(64, 1.116, (1.08, 1.15), Verdict.BETTER, "256", "512")
    return AbResult("decode", "K", "256", "512", comparisons=(faster,), answers=judged)


def test_too_few_pairs_to_show_answers_unchanged_is_never_kept_under_the_gate() -> None:
    # the ninth hostile pass: 8 of 18 wrong against 0 was "inconclusive" and kept as better
    lopsided = _few(8, 18)
    assert lopsided.answers is not None and lopsided.answers.gates
    assert better_arm(lopsided) is None
    # not significant with too few pairs: not refused, but not kept on its speed alone
    unsure = _few(2, 10)
    assert unsure.answers is not None and not unsure.answers.gates and unsure.answers.unshown
    assert better_arm(unsure) is None
    assert headline(unsure).endswith(
        "+11.6% at C64, answers inconclusive: 2 of 10 against 0 of 10 wrong, at least 20 paired "
        "probes needed: not kept on its speed alone"
    )
    clean = _few(0, 10)  # too few pairs, but no sign of a change: kept on its speed
    assert clean.answers is not None and not clean.answers.unshown and better_arm(clean) == "512"
    assert headline(clean).endswith("at least 20 paired probes needed")
    checked = _few(2, 10, AnswersMode.CHECK)  # check: shown, not gating
    assert checked.answers is not None and not checked.answers.unshown
    assert better_arm(checked) == "512"


def test_the_gate_keeps_no_spelling_of_a_candidate_whose_answers_were_not_shown_unchanged() -> None:
    """Issue 38, fifteenth pass (H4): ``--keep candidate`` or ``--keep 512`` kept a candidate the
    headline said was "not kept on its speed alone" (kept_value asked ``gates`` only)."""
    spellings = ("candidate", "512", "0512", "512.0", "better")
    for judged, why in ((_few(2, 10), NotKept.ANSWERS_UNSHOWN),
                        (_few(8, 18), NotKept.ANSWERS_CHANGED)):  # fmt: skip
        for keep in spellings:
            assert kept_value(keep, judged) is None, keep
            # issue 38, sixteenth pass: `--keep better` said no why (no `not_kept` in --json)
            assert not_kept(keep, judged) == why, keep
        assert kept_value("baseline", judged) == "256" and not_kept("256", judged) is None
        said = not_kept_phrase(replace(judged, restored=True, not_kept=why))
        assert said.startswith("--keep: the candidate 512 is NOT kept: under --answers gate")
        assert "the original value put back" in said
    unsure = replace(_few(2, 10), restored=True, not_kept=NotKept.ANSWERS_UNSHOWN)
    assert "**--keep: the candidate 512 is NOT kept" in ab_markdown(unsure)
    assert not_kept_phrase(_few(2, 10)) == "" and "NOT kept" not in ab_markdown(_few(2, 10))
    # answers shown unchanged enough (no more wrong than the baseline), or only checked: kept
    for kept in (_few(0, 10), _few(2, 10, AnswersMode.CHECK), _few(8, 18, AnswersMode.CHECK)):
        for keep in spellings:
            assert kept_value(keep, kept) == "512" and not_kept(keep, kept) is None, keep


def test_the_page_shows_a_differing_answer_beside_its_reference_escaped() -> None:
    page = markdown_html(ab_markdown(_result(12)))
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "the reference" in page and "tool-args-not-json" in page
    assert safe_text(HOSTILE) == "<script>alert(1)</script> ¦ 'x' next"


def test_answers_asked_for_but_not_checked_are_said_never_silent() -> None:
    """An A/B asked to gate on answers whose runs cannot carry a probe (too few --requests, a
    trace, a capacity search) said nothing: its headline and its words now say the verdict is on
    speed alone, and why; its JSON carries the code."""
    for why, words in (
        (AnswersUnchecked.TOO_FEW_REQUESTS, "--requests cannot carry one probe"),
        (AnswersUnchecked.TRACE, "a replayed trace carries no probes"),
        (AnswersUnchecked.CAPACITY, "a capacity search carries no probes"),
    ):
        said = unchecked_phrase(why)
        assert said.startswith("answers NOT checked (") and words in said
        assert "speed alone" in said


def test_the_gate_keeps_no_candidate_whose_answers_were_not_checked() -> None:
    """The thirty-second pass: ``--answers gate`` with every probe of the candidate cut by the
    run's end (or none sent before it) kept the faster candidate on its speed alone, though the
    gate keeps only a candidate whose answers are shown unchanged (it refuses ``--keep better``
    up front where no probe can be sent)."""
    verdict = decide_answers([])
    base = ArmAnswers("256", 4, 0, 0, (), 0, 0, 1.0)
    for cand in (ArmAnswers("512", 0, 0, 0, (), 0, 0, None, cut=4),  # every probe cut
                 ArmAnswers("512", 0, 0, 0, (), 0, 0, None)):  # none sent  # fmt: skip
        judged = AnswersJudgement(AnswersMode.GATE, base, cand, verdict, "k", 1, 8, 100)
        faster = Comparison(64, 1.116, (1.08, 1.15), Verdict.BETTER, "256", "512")
        result = AbResult("decode", "K", "256", "512", comparisons=(faster,), answers=judged)
        assert judged.unshown and not judged.gates and judged.holds_back
        assert better_arm(result) is None
        for keep in ("better", "candidate", "512"):
            assert kept_value(keep, result) is None and not_kept(keep, result) == (
                NotKept.ANSWERS_UNSHOWN
            )
        assert headline(result).endswith(": not kept on its speed alone")
        assert "answers NOT checked" in headline(result)
        checked = replace(result, answers=replace(judged, mode=AnswersMode.CHECK))
        assert better_arm(checked) == "512"  # check: shown, not gating
        assert headline(checked).endswith("the verdict is on speed alone")


def test_a_candidate_with_wrong_answers_beside_a_cut_baseline_is_not_kept() -> None:
    """The thirty-third pass (HIGH): the baseline's probes all cut by ``--deadline``, the
    candidate's judged with one wrong: no pairs, "0 of 0 against 0 of 0", and the gate kept the
    candidate (``ab --keep candidate``, ``tune --keep best``); the headline said its answers
    were NOT checked though they were."""
    faster = Comparison(64, 1.116, (1.08, 1.15), Verdict.BETTER, "256", "512")
    base = ArmAnswers("256", 0, 0, 0, (), 0, 0, None, cut=4)
    for wrong, held in ((1, True), (0, False)):
        cand = ArmAnswers("512", 4, wrong, wrong, ((Failure.TOOL_JSON, wrong),) if wrong else (),
                          0, 0, None)  # fmt: skip
        judged = AnswersJudgement(AnswersMode.GATE, base, cand, decide_answers([]), "k", 1, 8, 100)
        result = AbResult("decode", "K", "256", "512", comparisons=(faster,), answers=judged)
        assert judged.unshown is held and judged.holds_back is held
        assert (better_arm(result) is None) is held
        assert (not_kept("candidate", result) == NotKept.ANSWERS_UNSHOWN) is held
        said = headline(result)
        assert "answers NOT compared (every probe of 256 was cut by the run's end; 512: " in said
        assert f"512: {wrong} of 4 wrong)" in said and "NOT checked" not in said
        assert said.endswith(": not kept on its speed alone" if held
                             else ": the verdict is on speed alone")  # fmt: skip
    # by rate: 1 of 10 wrong for the baseline, 1 of 2 for the candidate, no pair between them
    base = ArmAnswers("256", 10, 1, 1, (), 0, 0, None)
    cand = ArmAnswers("512", 2, 1, 1, (), 0, 0, None)
    judged = AnswersJudgement(AnswersMode.GATE, base, cand, decide_answers([]), "k", 1, 12, 100)
    assert judged.unshown


def test_the_headline_shows_what_held_a_candidate_back() -> None:
    """The thirty-fourth pass: held back by its own judged answers (3 of 20 wrong against 1 of
    10), the headline showed only the pairs (0 of 10 against 1 of 10); judged in both arms with
    no pair between them it read "inconclusive: 0 of 0 against 0 of 0"."""
    pairs = [(False, True)] + [(False, False)] * 9  # the candidate's 10 paired answers right
    base = ArmAnswers("256", 10, 1, 1, (), 0, 0, None)
    cand = ArmAnswers("512", 20, 3, 3, (), 0, 0, None)
    judged = AnswersJudgement(AnswersMode.GATE, base, cand, decide_answers(pairs), "k", 1, 30, 100)
    faster = Comparison(64, 1.116, (1.08, 1.15), Verdict.BETTER, "256", "512")
    result = AbResult("decode", "K", "256", "512", comparisons=(faster,), answers=judged)
    assert judged.unshown and better_arm(result) is None
    assert headline(result).endswith(
        "answers inconclusive: 0 of 10 against 1 of 10 wrong (3 of 20 against 1 of 10 of all "
        "judged), at least 20 paired probes needed: not kept on its speed alone"
    )
    base, cand = replace(base, answers=4, wrong=0), replace(cand, answers=4, wrong=2)
    apart = replace(judged, baseline=base, candidate=cand, verdict=decide_answers([]))
    assert headline(replace(result, answers=apart)).endswith(
        "answers NOT compared (no probe was judged in both arms; 256: 0 of 4 wrong; 512: 2 of 4 "
        "wrong): not kept on its speed alone"
    )
