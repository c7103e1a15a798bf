"""A tune's answers: references from the state before it, each arm judged after every block
against the answers' baseline arm, and the arms that change answers dropped (``--answers gate``).

The answers' baseline arm is the arm at the knobs' original values when the tune has one, else
its first arm (the first value of each knob). References come from the original state, live
before the first visit (a resumed tune finds them in the ledger). Each arm is judged on its
visits paired with the baseline arm's by (block, concurrency, probe)
(:func:`~servelab.core.answers.judge.judge`); one that changes answers is dropped from the
running (:attr:`~servelab.core.ab.tunerun.TuneRecord.dropped`): never visited again, never the
best. An arm the speed rule eliminated keeps the answers it gave; when the baseline arm itself is
eliminated, its pairs stop there.
"""

from __future__ import annotations

from dataclasses import replace

from servelab.core.ab.result import AbMetric
from servelab.core.ab.tunerun import TuneRecord
from servelab.core.answers.contract import AnswersMode, AnswersUnchecked, probes_per_run
from servelab.core.answers.events import ArmDropped
from servelab.core.knob import same_value
from servelab.ops.ab.tuneconfig import TuneConfig
from servelab.ops.answers.session import AnswerSession, baseline_state
from servelab.ops.context import Operation

__all__ = ["answers_baseline", "judge_arms", "tune_answers", "tune_unchecked"]


def tune_unchecked(cfg: TuneConfig) -> AnswersUnchecked | None:
    """Why answers asked for cannot be checked in this tune (None: they can, or were not asked
    for): a capacity search or a trace carries no probes, nor a run too short for one."""
    answers, bench = cfg.answers, cfg.bench
    if answers is None or not answers.on:
        return None
    if AbMetric(cfg.metric) == AbMetric.CAPACITY:
        return AnswersUnchecked.CAPACITY
    if bench.trace is not None:
        return AnswersUnchecked.TRACE
    if not probes_per_run(bench.requests, answers.share, answers.probes):
        return AnswersUnchecked.TOO_FEW_REQUESTS
    return None


async def tune_answers(op: Operation, cfg: TuneConfig, record: TuneRecord) -> AnswerSession | None:
    """The tune's answer checking, its references taken from the live original state (found in
    the ledger when resumed); None when answers are off or :func:`tune_unchecked` says why not."""
    answers, bench = cfg.answers, cfg.bench
    if answers is None or not answers.on or tune_unchecked(cfg) is not None:
        return None
    state = baseline_state(op, cfg.settings(record.original))
    session = AnswerSession(answers, state, bench.model)
    if record.visits or (record.screening is not None and record.screening.visits):
        await session.stored(op)
    else:
        await session.ensure(op)
    return session


def answers_baseline(record: TuneRecord) -> str:
    """The arm at the original values, else the first arm."""
    for arm in record.arms:
        if all(same_value(v, o) for v, o in zip(arm.values, record.original, strict=True)):
            return arm.label
    return record.arms[0].label


def judge_arms(
    op: Operation, session: AnswerSession, cfg: TuneConfig, record: TuneRecord
) -> TuneRecord:
    """Every other arm judged against the answers' baseline arm; newly gated arms dropped."""
    if not record.arms:
        return record
    base = answers_baseline(record)
    visits = [(v.arm, v.round, v.answers) for v in record.visits if v.answers is not None]
    judged = []
    dropped = list(record.dropped or ())
    for arm in record.arms:
        if arm.label == base:
            continue
        j = session.judge(base, arm.label, [x for x in visits if x[0] in (base, arm.label)])
        if j is None:
            continue
        judged.append(j)
        if j.gates and arm.label not in dropped and session.config.mode is AnswersMode.GATE:
            dropped.append(arm.label)
            v = j.verdict
            op.say(ArmDropped(arm.label, base, v.candidate_wrong, v.baseline_wrong, v.n))
    return replace(record, answers=tuple(judged), dropped=tuple(dropped))
