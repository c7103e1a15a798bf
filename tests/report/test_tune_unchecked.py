"""A tune whose answers were not checked says it where its verdict stands: the headline, the arm
it left live, the JSON."""

from __future__ import annotations

import json
from dataclasses import replace

from servelab.core.ab.tune import TuneRule
from servelab.core.ab.tunerun import TuneArm, TuneKnob, TuneMetric, TuneRecord
from servelab.core.answers.contract import AnswersMode, AnswersUnchecked, ArmAnswers
from servelab.core.answers.judge import AnswersJudgement
from servelab.core.answers.rule import decide_answers
from servelab.report.tune import headline, tune_json, tune_markdown, unshown_phrase


def _record(why: AnswersUnchecked | None) -> TuneRecord:
    knob = TuneKnob("decode", "--max-running-requests", ("4", "64"))
    arms = (TuneArm("4", ("4",)), TuneArm("64", ("64",)))
    return TuneRecord((knob,), arms, TuneMetric.THROUGHPUT, (32,), TuneRule(), kept="64",
                      original=(None,), answers_unchecked=why)  # fmt: skip


def test_the_kept_arm_is_marked_unchecked() -> None:
    text = tune_markdown(_record(AnswersUnchecked.TRACE))
    assert "Left live: the best arm, 64 (`--keep best`), its answers NOT checked." in text
    assert "answers NOT checked (a replayed trace carries no probes)" in text
    doc = json.loads(tune_json(_record(AnswersUnchecked.CAPACITY)))
    assert doc["answers_unchecked"] == "capacity" and "answers NOT checked" in str(doc["headline"])
    checked = tune_markdown(replace(_record(None), answers_unchecked=None))
    assert "NOT checked" not in checked and "(`--keep best`)." in checked
    assert "answers_unchecked" not in json.loads(tune_json(_record(None)))


def _judged(arm: str, wrong: int, pairs: int) -> AnswersJudgement:
    verdict = decide_answers([(True, False)] * wrong + [(False, False)] * (pairs - wrong))
    base = ArmAnswers("4", pairs, 0, 0, (), 0, 0, 1.0)
    cand = ArmAnswers(arm, pairs, wrong, wrong, (), 0, 0, 1.0)
    return AnswersJudgement(AnswersMode.GATE, base, cand, verdict, "k", 1, pairs, 100)


def test_a_best_arm_whose_answers_too_few_pairs_show_unchanged_is_said_on_speed_alone() -> None:
    unsure = replace(_record(None), best="64", kept=None, answers=(_judged("64", 2, 10),))
    assert unsure.best_unshown
    assert headline(unsure).endswith(
        "; the best arm's answers not shown unchanged (too few probe pairs): on speed alone"
    )
    said = unshown_phrase(unsure)
    assert said.startswith("the best arm, 64, is best on speed alone: too few probe pairs")
    assert "2 of 10 against 0 of 10 wrong" in said and said.endswith("not kept — add --requests")
    shown = replace(unsure, answers=(_judged("64", 0, 30),))
    assert not shown.best_unshown and "speed alone" not in headline(shown)
    other = replace(unsure, answers=(_judged("16", 2, 10),))  # another arm's: not the best's
    assert not other.best_unshown


def test_a_best_arm_held_back_by_cut_probes_is_told_of_the_deadline() -> None:
    """The thirty-third pass: a best arm held back because probes were cut by ``--deadline``
    was told to add --requests only, which cuts no fewer."""
    base = ArmAnswers("4", 0, 0, 0, (), 0, 0, None, cut=6)
    cand = ArmAnswers("64", 6, 2, 2, (), 0, 0, None)
    judged = AnswersJudgement(AnswersMode.GATE, base, cand, decide_answers([]), "k", 1, 12, 100)
    cut = replace(_record(None), best="64", kept=None, answers=(judged,))
    assert cut.best_unshown
    said = unshown_phrase(cut)
    assert "64: 2 of 6 wrong" in said
    assert said.endswith(
        "not kept — add --requests, or a longer --deadline (probes were cut or not sent)"
    )
