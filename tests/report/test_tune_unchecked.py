"""A tune whose answers were not checked says it where its verdict stands: the headline, the arm
it left live, the JSON."""

from __future__ import annotations

import json
from dataclasses import replace

from servelab.core.ab.tune import TuneRule
from servelab.core.ab.tunerun import TuneArm, TuneKnob, TuneMetric, TuneRecord
from servelab.core.answers.contract import AnswersUnchecked
from servelab.report.tune import tune_json, tune_markdown


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
