"""The answers rule: does the candidate arm change answers more than the baseline arm does?
(pure).

Each probe answer is **wrong** or not (:attr:`~servelab.core.answers.answer.AnswerCheck.wrong`:
differs from the baseline state's reference, or a structural failure, or a retrieval probe that
lost its key). A real engine is not batch-invariant, so the baseline arm's own answers at the
arm's concurrency differ from its low-concurrency references now and then: the candidate is
judged against that, not against zero. Answers are **paired by prompt**: the same probe in the
same round and at the same concurrency, once in each arm (both arms send the same seeded probes;
:func:`pairs`). Of ``n`` pairs, ``f`` have the candidate wrong and the baseline right, ``g`` the
reverse.

- the test is the **exact McNemar test** on the discordant pairs (two-sided, Binomial(f + g, 1/2);
  :func:`~servelab.core.stats.mcnemar_exact_p`);
- the interval is **Newcombe's paired hybrid score interval** (method 10) of
  ``d = rate(candidate wrong) − rate(baseline wrong)`` at ``1 − α``
  (:func:`~servelab.core.stats.newcombe_paired_interval`).

Outcomes (:class:`AnswersOutcome`), at ``α`` (default 0.05):

- **changed** when ``p < α`` and the interval's lower bound is above 0: the candidate changes
  answers (a gate: never a win, whatever its speed);
- **fewer** when ``p < α`` and the upper bound is below 0: the candidate gets more answers right
  than the baseline (a recall fix, say);
- **inconclusive** when neither, with fewer than ``min_pairs`` pairs (default 20): too few
  probes to say the answers are unchanged (a significant change is one at any ``n``: the exact
  test holds with few pairs, and 8 of 18 wrong against none is not "too few to say");
- **unchanged** otherwise: not shown to change answers at ``α`` with ``n`` pairs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from servelab.core.stats import mcnemar_exact_p, newcombe_paired_interval

__all__ = [
    "ALPHA",
    "METHOD",
    "MIN_PAIRS",
    "AnswersOutcome",
    "AnswersVerdict",
    "PairKey",
    "decide_answers",
    "pairs",
]

ALPHA = 0.05
MIN_PAIRS = 20
METHOD = (
    "exact McNemar test on discordant pairs (two-sided); Newcombe 1998 paired hybrid score "
    "interval (method 10)"
)

#: A pair's key: (round, concurrency, probe id).
PairKey = tuple[int, int, int]


class AnswersOutcome(StrEnum):
    """What the rule concluded (what the ledger stores)."""

    CHANGED = "changed"
    UNCHANGED = "unchanged"
    FEWER = "fewer"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class AnswersVerdict:
    """The rule's outcome and what it read: ``n`` pairs; wrong answers per arm over the pairs;
    the discordant counts (``candidate_only``: the candidate wrong, the baseline right); the
    p-value; ``difference`` (candidate's wrong rate minus the baseline's) with its interval at
    ``1 − alpha``; the method."""

    outcome: AnswersOutcome
    n: int
    baseline_wrong: int
    candidate_wrong: int
    candidate_only: int
    baseline_only: int
    p: float
    difference: float
    low: float
    high: float
    alpha: float = ALPHA
    min_pairs: int = MIN_PAIRS
    method: str = METHOD

    @property
    def changes(self) -> bool:
        """True when the candidate changes answers (the gate's refusal)."""
        return self.outcome is AnswersOutcome.CHANGED


def pairs(
    baseline: Mapping[PairKey, bool], candidate: Mapping[PairKey, bool]
) -> list[tuple[bool, bool]]:
    """(candidate wrong, baseline wrong) for every key both arms answered, in key order."""
    keys = sorted(baseline.keys() & candidate.keys())
    return [(candidate[k], baseline[k]) for k in keys]


def decide_answers(
    paired: list[tuple[bool, bool]], *, alpha: float = ALPHA, min_pairs: int = MIN_PAIRS
) -> AnswersVerdict:
    """The rule (the module's docstring) over ``paired`` (candidate wrong, baseline wrong)."""
    both = sum(c and b for c, b in paired)
    f = sum(c and not b for c, b in paired)
    g = sum(b and not c for c, b in paired)
    n = len(paired)
    neither = n - both - f - g
    p = mcnemar_exact_p(f, g)
    ci = newcombe_paired_interval(both, f, g, neither, 1 - alpha)
    outcome = AnswersOutcome.UNCHANGED
    if p < alpha and ci.low > 0:
        outcome = AnswersOutcome.CHANGED
    elif p < alpha and ci.high < 0:
        outcome = AnswersOutcome.FEWER
    elif n < min_pairs:
        outcome = AnswersOutcome.INCONCLUSIVE
    diff = ci.estimate if n else math.nan
    return AnswersVerdict(outcome, n, both + g, both + f, f, g, p, diff, ci.low, ci.high,
                          alpha, min_pairs)  # fmt: skip
