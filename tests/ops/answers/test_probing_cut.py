"""A probe cut by the run's end (``--deadline``, a stop) is never judged (the thirty-first
hostile pass's high): read back from its record it is marked cut, its check is neither wrong nor
right, the arm's summary counts it apart, it is in no pair, and an arm whose every probe was cut
says its answers were not checked. A probe that failed is still wrong; one that finished is
judged as before. Pure: records and bodies in, the judgement out."""

from __future__ import annotations

import json
from typing import Any

from servelab.core.answers.answer import Answer, Failure
from servelab.core.answers.contract import (
    AnswerReferences,
    AnswersConfig,
    State,
    summarize_arm,
    wrong_by_pair,
)
from servelab.core.answers.judge import ArmVisitAnswers, check_visit, judge
from servelab.core.answers.probes import Probe, ProbeKind, probe_set
from servelab.core.load.records import FailReason, RequestRecord
from servelab.core.verify.answers import outcome_of
from servelab.ops.answers.probing import ProbePlan, read_probe_answers
from servelab.report.answers import answers_lines, answers_phrase

CONFIG = AnswersConfig(context_len=8192)
PROBES = probe_set(CONFIG.seed, CONFIG.probes, CONFIG.context_len)
PLAIN = [p for p in PROBES if p.kind is ProbeKind.PLAIN]


def _sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)


def _body(probe: Probe, *, whole: bool = True) -> bytes:
    """The reference's answer to ``probe``: ``max_tokens`` tokens, ending on ``length``; not
    ``whole``: its first token only (a stream cut before its end)."""
    pieces = [{"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": None}]}]
    if not whole:
        return _sse(*pieces)
    end = [{"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
           {"choices": [], "usage": {"completion_tokens": probe.max_tokens}}]  # fmt: skip
    return _sse(*pieces, *end) + b"data: [DONE]\n\n"


def _references() -> AnswerReferences:
    answers = tuple(Answer(p.id, "a", finish_reason="length", tokens=p.max_tokens)
                    for p in PLAIN)  # fmt: skip
    return AnswerReferences("key", State("hash", ()), "sim-model", 1, answers)


def _read(kinds: list[str], level: int = 32) -> tuple[Answer, ...]:
    """One record per probe of ``PLAIN``: ``ok`` (the reference's answer whole), ``cut`` (by the
    run's deadline, one token in), ``stop`` (interrupted, never sent), ``failed`` (http 500)."""
    records, bodies, probe_of = [], {}, {}
    for j, (probe, kind) in enumerate(zip(PLAIN, kinds, strict=False)):
        index = 1000 + j
        probe_of[index] = probe.id
        record = RequestRecord(index, scheduled_ns=1, sent_ns=2)
        if kind == "ok":
            record.end_ns, bodies[index] = 50, _body(probe)
        elif kind == "cut":
            record.end_ns, bodies[index] = 40, _body(probe, whole=False)
            record.fail(FailReason.DEADLINE)
        elif kind == "stop":
            record.sent_ns = 0
            record.fail(FailReason.INTERRUPTED)
        else:
            record.end_ns, bodies[index] = 30, b""
            record.fail("http 500")
        records.append(record)
    return read_probe_answers(ProbePlan([], [], probe_of), records, bodies, level)


def test_a_cut_probe_is_counted_apart_never_wrong_and_in_no_pair() -> None:
    assert len(PLAIN) >= 4
    answers = _read(["ok", "cut", "stop", "failed"])
    assert [a.cut for a in answers] == [False, True, True, False]
    checks = check_visit(PROBES, _references(), answers)
    assert [c.cut for c in checks] == [False, True, True, False]
    assert [c.wrong for c in checks] == [False, False, False, True]
    arm = summarize_arm("b", checks, _references().by_probe())
    assert (arm.answers, arm.cut, arm.wrong, arm.differ) == (2, 2, 1, 1), arm
    assert arm.failures == ((Failure.REQUEST, 1),) and not arm.unchecked
    assert [e.probe for e in arm.examples] == [PLAIN[3].id]
    pairs = wrong_by_pair([(0, checks)])
    assert pairs == {(0, 32, PLAIN[0].id): False, (0, 32, PLAIN[3].id): True}


def test_an_arm_whose_every_probe_was_cut_is_not_checked() -> None:
    n = len(PLAIN)
    visits = [ArmVisitAnswers("base", r, _read(["ok"] * n)) for r in range(3)]
    visits += [ArmVisitAnswers("cand", r, _read(["cut"] * n)) for r in range(3)]
    judged = judge(CONFIG, _references(), "base", "cand", visits)
    assert judged.candidate.unchecked and judged.candidate.cut == 3 * n
    assert judged.candidate.wrong == 0 and judged.candidate.failures == ()
    assert judged.verdict.n == 0 and not judged.verdict.changes and not judged.gates
    phrase = answers_phrase(judged)
    assert phrase.startswith("answers NOT checked (every probe of cand was cut"), phrase
    assert "changes" not in phrase and "unchanged" not in phrase
    assert f"{3 * n} cut" in "\n".join(answers_lines(judged))


def test_an_arm_none_of_whose_probes_was_sent_is_not_checked() -> None:
    """A deadline before any probe left (the thirty-second pass: "answers inconclusive: 0 of 0
    against 0 of 0 wrong", the candidate then kept on speed without a word; then said, and still
    kept on speed alone under the gate)."""
    n = len(PLAIN)
    visits = [ArmVisitAnswers("base", r, _read(["ok"] * n)) for r in range(3)]
    visits += [ArmVisitAnswers("cand", r, ()) for r in range(3)]
    judged = judge(CONFIG, _references(), "base", "cand", visits)
    assert judged.candidate.unchecked and judged.candidate.cut == 0
    phrase = answers_phrase(judged)
    assert phrase.startswith("answers NOT checked (no probe of cand was sent"), phrase
    # under the gate (CONFIG's mode) a candidate whose answers were not checked is not kept
    assert phrase.endswith("not kept on its speed alone"), phrase
    assert judged.unshown and judged.holds_back
    both = judge(CONFIG, _references(), "base", "cand", [ArmVisitAnswers("base", 0, ()),
                 ArmVisitAnswers("cand", 0, _read(["cut"] * n))])  # fmt: skip
    said = answers_phrase(both)
    assert "every probe of cand was cut" in said and "no probe of base was sent" in said, said


def test_a_slower_arm_cut_by_the_deadline_does_not_change_answers() -> None:
    """The repro's shape: the candidate's later probes still in flight at the deadline; its
    finished ones match the references. Judged on the pairs both arms finished: unchanged."""
    n = len(PLAIN)
    half = ["ok"] * (n // 2) + ["cut"] * (n - n // 2)
    visits = [ArmVisitAnswers("base", r, _read(["ok"] * n)) for r in range(10)]
    visits += [ArmVisitAnswers("cand", r, _read(half)) for r in range(10)]
    judged = judge(CONFIG, _references(), "base", "cand", visits)
    v = judged.verdict
    assert v.n == 10 * (n // 2) and v.candidate_wrong == 0 and not v.changes, v
    assert judged.candidate.cut == 10 * (n - n // 2) and judged.candidate.wrong == 0
    assert answers_phrase(judged).startswith("answers unchanged: 0 of")
    assert "probes cut by the run's end, not judged" in answers_phrase(judged)


def test_verify_never_passes_a_probe_a_stop_cut() -> None:
    """verify sets no deadline: its probe cut by a stop never answered, so it is a failed
    request there (as before), never a pass."""
    (answer,) = _read(["stop"])
    outcome = outcome_of(PLAIN[0], answer, _references().by_probe()[PLAIN[0].id])
    assert outcome.wrong and outcome.failures == (Failure.REQUEST,)
