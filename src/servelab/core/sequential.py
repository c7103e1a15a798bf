"""The stopping rule of ``ab --until-decided``: a confidence sequence for the mean log ratio (pure).

After every round the per-round log ratios ``d_1..d_n`` (:mod:`servelab.core.paired`) give an
interval that is valid **at every n simultaneously**: ``P(exists n: mu outside CS_n) <= alpha``,
so the experiment may look after each round and stop whenever it likes without inflating the
error rate (a fixed-n t interval checked after every round would not keep its level).

The method is Lai's confidence sequence for a Gaussian mean with unknown variance (Lai 1976, "On
confidence sequences", Ann. Statist. 4(2), Thm 2; revisited by Wang & Ramdas 2023, "Anytime-valid
t-tests and confidence sequences for Gaussian means with unknown variance"). For a candidate mean
``mu0`` the scale-invariant Bayes factor of the t statistic ``t_n = (mean d − mu0) / (s/√n)``
with a N(0, g) mixture over the standardized effect (Rouder et al. 2009, eq. 1 with fixed g) is

    B_n(mu0) = (1 + n g)^(-1/2) · [(1 + t²/ν) / (1 + t²/(ν (1 + n g)))]^(n/2),   ν = n − 1.

Under ``mu = mu0`` it is a non-negative martingale (in the filtration of the scale-invariant
data), so by Ville's inequality ``P(sup_n B_n >= 1/alpha) <= alpha``. The confidence sequence is
``{mu0 : B_n(mu0) < 1/alpha}``; solved for ``t²`` it is the closed form

    |mean d − mu0| < (s/√n) · sqrt(ν (A − 1) / (1 − A/k)),   k = 1 + n g,  A = (√k / alpha)^(2/n),

unbounded while ``A >= k`` (always at n = 2; from n = 3 on when g > (1/alpha − 1)/3). ``g``
(the mixture's variance of the standardized effect) tunes where the sequence is tightest; the
default 20 makes it tightest around 3..6 rounds, the range an A/B lives in.

Decision per concurrency, with an equivalence margin ``m`` (``--margin 1%``): ``better`` when the
whole sequence is above 0, ``worse`` when below, ``equivalent`` when it lies inside
``(−ln(1+m), ln(1+m))``, else ``undecided``. The level holds per concurrency.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from servelab.core.stats import mean, sample_std

__all__ = [
    "BETTER",
    "DEFAULT_MIXTURE",
    "EQUIVALENT",
    "UNDECIDED",
    "WORSE",
    "ConfidenceSequence",
    "confidence_sequence",
    "cs_multiplier",
    "decide",
    "first_decision",
]

BETTER = "better"
WORSE = "worse"
EQUIVALENT = "equivalent"
UNDECIDED = "undecided"
DEFAULT_MIXTURE = 20.0
METHOD = "Lai (1976) confidence sequence, Gaussian mean with unknown variance"


@dataclass(frozen=True, slots=True)
class ConfidenceSequence:
    """The anytime-valid interval on the mean log ratio after ``n`` rounds (``low``/``high``
    infinite while unbounded); ``ratio_ci`` is the same on the ratio scale."""

    n: int
    estimate: float
    low: float
    high: float
    alpha: float
    mixture: float
    method: str

    @property
    def ratio(self) -> float:
        return math.exp(self.estimate) if not math.isnan(self.estimate) else math.nan

    @property
    def ratio_ci(self) -> tuple[float, float]:
        return (_exp(self.low), _exp(self.high))

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)


def _exp(x: float) -> float:
    if math.isnan(x):
        return math.nan
    return 0.0 if x == -math.inf else math.inf if x == math.inf else math.exp(x)


def cs_multiplier(n: int, *, alpha: float = 0.05, mixture: float = DEFAULT_MIXTURE) -> float:
    """The half-width of the sequence in units of ``s/√n`` after ``n`` values (inf: unbounded)."""
    if n < 2:
        return math.inf
    k, nu = 1.0 + n * mixture, n - 1
    a = math.exp((0.5 * math.log(k) - math.log(alpha)) * 2.0 / n)
    if a >= k:
        return math.inf
    return math.sqrt(nu * (a - 1.0) / (1.0 - a / k))


def confidence_sequence(
    values: Sequence[float], *, alpha: float = 0.05, mixture: float = DEFAULT_MIXTURE
) -> ConfidenceSequence:
    """Lai's confidence sequence for the mean of ``values`` after ``len(values)`` of them."""
    n = len(values)
    m = mean(values)
    mult = cs_multiplier(n, alpha=alpha, mixture=mixture)
    sd = sample_std(values) if n >= 2 else math.nan
    if math.isinf(mult) or math.isnan(sd) or sd == 0.0:
        return ConfidenceSequence(n, m, -math.inf, math.inf, alpha, mixture, METHOD)
    half = mult * sd / math.sqrt(n)
    return ConfidenceSequence(n, m, m - half, m + half, alpha, mixture, METHOD)


def decide(cs: ConfidenceSequence, margin: float | None) -> str:
    """``better``/``worse`` when the sequence excludes 0, ``equivalent`` inside the margin."""
    if cs.low > 0.0:
        return BETTER
    if cs.high < 0.0:
        return WORSE
    if margin is not None and margin > 0:
        bound = math.log1p(margin)
        if -bound < cs.low and cs.high < bound:
            return EQUIVALENT
    return UNDECIDED


def first_decision(
    values: Sequence[float],
    margin: float | None,
    *,
    alpha: float = 0.05,
    mixture: float = DEFAULT_MIXTURE,
) -> tuple[int | None, str]:
    """The first n at which the sequence over ``values[:n]`` decided, and the decision
    (``(None, "undecided")`` when it never did)."""
    for n in range(2, len(values) + 1):
        decision = decide(confidence_sequence(values[:n], alpha=alpha, mixture=mixture), margin)
        if decision != UNDECIDED:
            return n, decision
    return None, UNDECIDED
