"""An experiment's answer checking: the references of its baseline state and the judgement of
its arms (what ``ab``, ``tune`` and ``case bisect`` share).

:class:`AnswerSession` holds the experiment's :class:`~servelab.core.answers.contract
.AnswersConfig` and baseline state; :meth:`AnswerSession.ensure` gets the references once the
baseline arm is live (the ledger's for the same state, else taken at low concurrency through the
router), and :meth:`AnswerSession.judge` judges two arms' visits
(:func:`~servelab.core.answers.judge.judge`). Visits measured before the references existed keep
their answers raw and are judged at the end alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servelab.core.answers.answer import Answer
from servelab.core.answers.contract import AnswerReferences, AnswersConfig, State, state_key
from servelab.core.answers.judge import AnswersJudgement, ArmVisitAnswers, judge
from servelab.core.deploy.spec import spec_hash
from servelab.io.ledger.answers import AnswerStore
from servelab.ops.answers.references import references
from servelab.ops.arm import Setting, router_url, served_model
from servelab.ops.context import Operation

__all__ = ["AnswerSession", "baseline_state"]


def baseline_state(op: Operation, settings: Sequence[Setting]) -> State:
    """The state of an experiment's baseline: the spec's hash and the baseline's knob values."""
    knobs = tuple((s.service, s.knob, s.value) for s in settings)
    return State(spec_hash(op.spec), knobs)


@dataclass
class AnswerSession:
    """One experiment's answer checking (see the module's docstring)."""

    config: AnswersConfig
    state: State
    model: str
    refs: AnswerReferences | None = None

    async def ensure(self, op: Operation) -> AnswerReferences:
        """The references, taken (or found) now when not yet: call with the baseline live."""
        if self.refs is None:
            url = router_url(op)
            self.model = await served_model(url, self.model)  # as the arms' runs name it
            self.refs = await references(url, self.config, self.state, model=self.model,
                                         ledger=op.ledger, say=op.say)  # fmt: skip
        return self.refs

    async def stored(self, op: Operation) -> AnswerReferences | None:
        """The references the ledger holds for the state (never taken now: the state live may
        not be the baseline's)."""
        if self.refs is None and op.ledger is not None:
            self.model = await served_model(router_url(op), self.model)
            self.refs = AnswerStore(op.ledger).find(state_key(self.state, self.config, self.model))
        return self.refs

    def judge(
        self,
        baseline: str,
        candidate: str,
        visits: Sequence[tuple[str, int, Sequence[Answer]]],
        *,
        requests: int = 0,
    ) -> AnswersJudgement | None:
        """Two arms judged from ``(arm, round, answers)`` of every visit (None: no references:
        the baseline was never visited)."""
        if self.refs is None:
            return None
        answered = [ArmVisitAnswers(arm, rnd, tuple(a)) for arm, rnd, a in visits]
        return judge(self.config, self.refs, baseline, candidate, answered, requests=requests)
