"""``case test --test answers``: a knob suspect's arms judged by their answers.

Each visit makes its arm live and runs the bench template at the test's concurrency carrying
the greedy answer probes (:mod:`servelab.ops.case.answers`); the references are the revert arm's
(its first visit takes them, or the ledger holds them for that state). A visit before the
references existed keeps its answers and is judged at the end with the rest
(:meth:`CaseAnswers.judged`): each visit's units are its answers, its failures the wrong ones,
and the case's rule compares the arms (Fisher's exact test, Newcombe's interval). Each visit
records the load it reached on the decode (:mod:`servelab.ops.case.reached`): a suspect arm
below the load the wrong answers need clears nothing (:mod:`servelab.core.case.load`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from servelab.core.answers.answer import Answer
from servelab.core.answers.events import ArmAnswered
from servelab.core.bench.contract import BenchConfig
from servelab.core.case.experiment import ARM_REVERT, ExperimentVisit
from servelab.core.case.model import Target
from servelab.errors import CaseError
from servelab.ops.answers.session import AnswerSession, baseline_state
from servelab.ops.arm import Setting, make_live
from servelab.ops.case.answers import answers_bench, probe_answers, wrong_answers
from servelab.ops.context import Operation

if TYPE_CHECKING:  # the test's config is defined by its runner, which imports this module
    from servelab.ops.case.experiment import CaseTestConfig

__all__ = ["CaseAnswers", "case_answers"]


@dataclass
class CaseAnswers:
    """A case test's answers: the session (references from the revert arm), the bench at the
    test's level, and every visit's raw answers."""

    session: AnswerSession
    bench: BenchConfig
    runs: int
    answers: dict[int, list[Answer]] = field(default_factory=dict)

    async def visit(
        self, op: Operation, target: Target, arm: str, suspect: str | None, revert: str | None,
        rnd: int,
    ) -> ExperimentVisit:  # fmt: skip
        """``arm`` made live and its probes answered (the revert arm's first visit takes the
        references first)."""
        started = time.monotonic()
        value = suspect if arm != ARM_REVERT else revert
        service = str(target.service)
        # its answers differing (e2e.answers_changed) is what this test measures, not a sign
        # the arm is not live
        live = await make_live(op, [Setting(service, target.name, value)],
                               f"case test of {target}: arm {arm}, round {rnd + 1}",
                               answers_tested=True)  # fmt: skip
        if arm == ARM_REVERT:
            await self.session.ensure(op)
        got, _ids, reached = await probe_answers(op, self.bench, self.runs, rnd,
                                                 f"case test {target} {arm}")  # fmt: skip
        index = len(self.answers)
        self.answers[index] = got
        cut = sum(a.cut for a in got)  # cut by the run's end: not judged, not counted answered
        judged = wrong_answers(self.session, got) if self.session.refs is not None else None
        wrong = None if judged is None else judged[1]
        op.say(ArmAnswered(arm, value, wrong, len(got) - cut, cut))
        return ExperimentVisit(rnd, arm, value, len(got) - cut, wrong or 0, live.verification_id,
                               None, round(time.monotonic() - started, 3), reached)  # fmt: skip

    def judged(self, visits: Sequence[ExperimentVisit]) -> list[ExperimentVisit]:
        """Every visit's answers checked against the references (now taken)."""
        out = []
        for i, visit in enumerate(visits):
            units, failed = wrong_answers(self.session, self.answers.get(i, []))
            out.append(dataclasses.replace(visit, sessions=units, failed=failed))
        return out


def case_answers(
    op: Operation, cfg: CaseTestConfig, target: Target, revert: str | None
) -> CaseAnswers:
    """The answers test of ``cfg`` on a knob suspect."""
    if target.kind != "knob" or cfg.bench is None:
        raise CaseError("an answers test takes a knob suspect (a component has no arms to make "
                        "live)")  # fmt: skip
    bench = answers_bench(cfg.bench, cfg.test.concurrency)
    assert bench.answers is not None
    state = baseline_state(op, [Setting(str(target.service), target.name, revert)])
    return CaseAnswers(AnswerSession(bench.answers, state, bench.model), bench, cfg.runs)
