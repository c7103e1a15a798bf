"""The answers rule checked by seeded simulation (pure; what ``benchmarks/answers_rule.py`` runs).

:func:`simulate_rule` runs ``runs`` simulated A/Bs of ``pairs`` paired probe answers each. Both
arms answer with the simulator's batch nondeterminism (:mod:`servelab.sim.answers`): each greedy
token flips with probability ``rate × batch / 64``, so a probe answer of ``L`` tokens differs from
its reference with probability ``1 − (1 − rate × batch / 64)^L`` (the probe set's answer lengths in
turn: 24 plain, 10 tool-call, 6 retrieval tokens), drawn independently in the two arms (the worst
case for false alarms: a shared batch would make the arms agree more). The candidate may also
garble ``garble`` of its answers (the bf16 keys: one in three). The rule is
:func:`~servelab.core.answers.rule.decide_answers`; the result counts each outcome.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from servelab.core.answers.rule import ALPHA, MIN_PAIRS, AnswersOutcome, decide_answers

__all__ = ["ANSWER_TOKENS", "RuleSimulation", "answer_flip", "simulate_rule"]

#: The probe set's answer lengths in tokens, in the order of its kinds.
ANSWER_TOKENS = (24, 10, 6)


def answer_flip(rate: float, batch: int, tokens: int) -> float:
    """The chance an answer of ``tokens`` differs under the simulator's batch nondeterminism."""
    per_token = min(1.0, max(rate, 0.0) * batch / 64)
    return 1.0 - (1.0 - per_token) ** tokens


@dataclass(frozen=True)
class RuleSimulation:
    """``runs`` simulated A/Bs: how many ended in each outcome."""

    runs: int
    pairs: int
    rate: float
    batch: int
    garble: float
    outcomes: dict[AnswersOutcome, int]

    def share(self, outcome: AnswersOutcome) -> float:
        return self.outcomes.get(outcome, 0) / self.runs if self.runs else 0.0


def simulate_rule(
    *,
    runs: int,
    pairs: int,
    rate: float,
    batch: int = 64,
    garble: float = 0.0,
    seed: int = 0,
    alpha: float = ALPHA,
    min_pairs: int = MIN_PAIRS,
) -> RuleSimulation:
    """``runs`` seeded A/Bs (the module's docstring)."""
    rng = random.Random(seed)
    flips = [answer_flip(rate, batch, n) for n in ANSWER_TOKENS]
    counts: Counter[AnswersOutcome] = Counter()
    for _ in range(runs):
        paired = []
        for i in range(pairs):
            q = flips[i % len(flips)]
            base = rng.random() < q
            cand = rng.random() < q or rng.random() < garble
            paired.append((cand, base))
        counts[decide_answers(paired, alpha=alpha, min_pairs=min_pairs).outcome] += 1
    return RuleSimulation(runs, pairs, rate, batch, garble, dict(counts))
