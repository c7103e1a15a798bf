"""Two arms' probe answers judged against the references and each other (pure).

:func:`judge` takes every visit's answers of the baseline arm and of the candidate arm (each
with its round), checks each against its probe and the references
(:func:`~servelab.core.answers.answer.check_answer`), sums each arm up
(:func:`~servelab.core.answers.contract.summarize_arm`) and applies the rule to the answers
paired by (round, concurrency, probe) (:func:`~servelab.core.answers.rule.decide_answers`). The
result, :class:`AnswersJudgement`, is what an A/B, a tune's arm and a bisection's test keep.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servelab.core.answers.answer import Answer, AnswerCheck, check_answer
from servelab.core.answers.contract import (
    AnswerReferences,
    AnswersConfig,
    AnswersMode,
    ArmAnswers,
    summarize_arm,
    wrong_by_pair,
)
from servelab.core.answers.probes import Probe, probe_set
from servelab.core.answers.rule import AnswersOutcome, AnswersVerdict, decide_answers, pairs

__all__ = ["AnswersJudgement", "ArmVisitAnswers", "check_visit", "judge"]


@dataclass(frozen=True)
class ArmVisitAnswers:
    """One visit's answers: its arm, its round, what the probes were answered."""

    arm: str
    round: int
    answers: tuple[Answer, ...]


@dataclass(frozen=True)
class AnswersJudgement:
    """Both arms' answers and the rule's verdict; ``mode`` as asked (``check``: shown, not
    gating); ``references``: the ledger row of the references used (None: not stored);
    ``probes``/``requests``: the probe requests sent and the load requests beside them."""

    mode: AnswersMode
    baseline: ArmAnswers
    candidate: ArmAnswers
    verdict: AnswersVerdict
    references_key: str
    references: int | None = None
    probes: int = 0
    requests: int = 0

    @property
    def gates(self) -> bool:
        """True when the candidate changes answers and the mode makes that a refusal."""
        return self.mode is AnswersMode.GATE and self.verdict.changes

    @property
    def unshown(self) -> bool:
        """True when the mode gates, too few pairs could show the answers unchanged and the
        candidate got more of them wrong than the baseline (of the pairs, or of each arm's own
        judged answers, by rate: the baseline's probes may have been cut where the candidate's
        were judged), or none of its answers was judged (every probe cut by the run's end, or
        none sent before it): not refused (not significant), but not kept on its speed alone
        either. With answers judged and no more wrong than the baseline there is no sign of a
        change to hold it back for."""
        v, cand, base = self.verdict, self.candidate, self.baseline
        worse = v.candidate_wrong > v.baseline_wrong or _wrong_rate(cand) > _wrong_rate(base)
        return (self.mode is AnswersMode.GATE and v.outcome is AnswersOutcome.INCONCLUSIVE
                and (worse or cand.unchecked))  # fmt: skip

    @property
    def holds_back(self) -> bool:
        """True when the candidate must not be kept: it changes answers, or they were not shown
        unchanged (:attr:`gates`, :attr:`unshown`)."""
        return self.gates or self.unshown

    @property
    def share(self) -> float:
        """The probes' share of all the requests sent."""
        total = self.probes + self.requests
        return self.probes / total if total else 0.0


def _wrong_rate(arm: ArmAnswers) -> float:
    """The share of an arm's judged answers that were wrong (0 when none was judged)."""
    return arm.wrong / arm.answers if arm.answers else 0.0


def check_visit(
    probes: Sequence[Probe], references: AnswerReferences, answers: Sequence[Answer]
) -> list[AnswerCheck]:
    """Each answer of a visit checked against its probe and reference."""
    by_id = {p.id: p for p in probes}
    refs = references.by_probe()
    return [check_answer(by_id[a.probe], a, refs.get(a.probe)) for a in answers
            if a.probe in by_id]  # fmt: skip


def judge(
    config: AnswersConfig,
    references: AnswerReferences,
    baseline: str,
    candidate: str,
    visits: Sequence[ArmVisitAnswers],
    *,
    requests: int = 0,
) -> AnswersJudgement:
    """The two arms judged (the module's docstring); ``requests``: the load's requests."""
    probes = probe_set(config.seed, config.probes, config.context_len)
    checked = {
        arm: [(v.round, check_visit(probes, references, v.answers)) for v in visits
              if v.arm == arm]
        for arm in (baseline, candidate)
    }  # fmt: skip
    refs = references.by_probe()
    summaries = {arm: summarize_arm(arm, [c for _r, cs in checked[arm] for c in cs], refs)
                 for arm in checked}  # fmt: skip
    verdict = decide_answers(
        pairs(wrong_by_pair(checked[baseline]), wrong_by_pair(checked[candidate])),
        alpha=config.alpha, min_pairs=config.min_pairs,
    )  # fmt: skip
    sent = sum(len(v.answers) for v in visits)
    return AnswersJudgement(config.mode, summaries[baseline], summaries[candidate], verdict,
                            references.key, references.id, sent, requests)  # fmt: skip
