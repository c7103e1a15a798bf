"""A case's answers test (``case test --test answers``, ``case bisect --test answers``): bench runs
at the test's concurrency carrying the greedy answer probes, each wrong answer a failed unit.

Wrong is judged against references from the case's good state (a bisection's good state, a case
test's revert arm; :class:`~servelab.ops.answers.session.AnswerSession`), as
:attr:`~servelab.core.answers.answer.AnswerCheck.wrong` says: a structural failure, a retrieval
probe that lost its key, or another probe's answer differing from the reference. The arms'
failure rates are then compared by the case's own rule (Fisher's exact test, Newcombe's interval).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from servelab.core.answers.answer import Answer
from servelab.core.answers.contract import AnswersConfig, AnswersUnchecked, probes_per_run
from servelab.core.answers.judge import check_visit
from servelab.core.answers.probes import probe_set
from servelab.core.bench.contract import BenchConfig
from servelab.core.case.probe import ProbeTest, ProbeTestKind
from servelab.core.case.reached import ReachedLoad
from servelab.core.load.records import RequestRecord
from servelab.errors import CaseError
from servelab.ops.answers.session import AnswerSession
from servelab.ops.arm import measure
from servelab.ops.case.reached import RunningWatch, reached_load
from servelab.ops.context import Operation

__all__ = ["answers_bench", "bisect_answers", "probe_answers", "wrong_answers"]


def bisect_answers(
    test: ProbeTest, gate: bool, requests: int
) -> AnswersConfig | AnswersUnchecked | None:
    """The answers a bisection's runs carry: an answers test's; a threshold test's when ``gate``
    (None: a soak test, or not ``gate``); why not when its runs are too short to carry a probe."""
    if test.kind is ProbeTestKind.ANSWERS:
        return AnswersConfig()
    if test.kind is not ProbeTestKind.THRESHOLD or not gate:
        return None
    config = AnswersConfig()
    if not probes_per_run(requests, config.share, config.probes):
        return AnswersUnchecked.TOO_FEW_REQUESTS
    return config


def answers_bench(bench: BenchConfig, level: int) -> BenchConfig:
    """``bench`` at ``level`` with the answer probes on (refused when a run cannot carry one)."""
    config = bench.answers or AnswersConfig()
    if not probes_per_run(bench.requests, config.share, config.probes):
        raise CaseError(f"an answers test needs runs long enough to carry a probe: --requests "
                        f"{bench.requests} is too few")  # fmt: skip
    return dataclasses.replace(bench, answers=config, concurrencies=(level,), repeat=1)


async def probe_answers(
    op: Operation, bench: BenchConfig, runs: int, rnd: int, label: str
) -> tuple[list[Answer], list[int], ReachedLoad | None]:
    """``runs`` bench runs at ``bench``'s one level (round ``rnd``'s probes): every answer, the
    bench runs recorded, and the load they reached (:mod:`servelab.ops.case.reached`)."""
    answers: list[Answer] = []
    ids: list[int] = []
    records: list[RequestRecord] = []
    async with await RunningWatch.of(op) as watch:
        for k in range(runs):
            got = await measure(op, bench, list(bench.concurrencies), label, None,
                                round_=rnd * runs + k)  # fmt: skip
            answers += got.answers
            ids += got.bench_run_ids
            records += got.records
    return answers, ids, reached_load(watch, records)


def wrong_answers(session: AnswerSession, answers: Sequence[Answer]) -> tuple[int, int]:
    """(answers checked, wrong answers) against the session's references; a probe cut by the
    run's end is not checked (in neither count)."""
    if session.refs is None:
        raise CaseError("no reference answers: the good state was never measured")
    config = session.config
    probes = probe_set(config.seed, config.probes, config.context_len)
    checks = [c for c in check_visit(probes, session.refs, answers) if not c.cut]
    return len(checks), sum(c.wrong for c in checks)
