"""The stopping rule of ``ab --until-decided``: intervals on the mean log ratio valid at every look.

After every round the per-round log ratios ``d_1..d_n`` (:mod:`servelab.core.ab.paired`) give an
interval that is valid **at every look simultaneously**: ``P(exists n: mu outside CS_n) <=
alpha``, so the experiment may look after each round and stop whenever it likes without inflating
the error rate (a fixed-n t interval checked after every round would not keep its level). Two
families: Pocock's repeated confidence intervals for at most K looks (the default, narrower) and
Lai's confidence sequence for any number of looks (``looks=None``).

**Lai's confidence sequence** for a Gaussian mean with unknown variance (Lai 1976, "On confidence
sequences", Ann. Statist. 4(2), Thm 2; revisited by Wang & Ramdas 2023, "Anytime-valid t-tests
and confidence sequences for Gaussian means with unknown variance"). For a candidate mean
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

**Pocock repeated confidence intervals** (``boundary="pocock"``, the default of ``ab
--until-decided``). When the most looks ``K`` (``--max-rounds``) is fixed in advance, a
group-sequential boundary spends alpha only on the looks that can happen and is narrower than
the anytime sequence at every n <= K: Pocock's (1977) constant boundary on Student's t statistic,
as repeated confidence intervals (Jennison & Turnbull 1989, "Interim analyses: the repeated
confidence interval approach", JRSS B 51(3); 2000, ch. 9):

    |mean d − mu0| < t_{1 − a'/2, n − 1} · s/√n,   looks n = 3..K,

with one per-look level ``a'`` chosen so that ``P(exists n <= K: mu outside) = alpha``. The
t statistics are pivotal (their joint law under ``mu`` does not depend on sigma), so ``a'`` is a
function of ``K`` and ``alpha`` alone: the ``alpha`` quantile of ``min_n p_n`` over 200 000
seeded simulated null sequences of K standard normals (``pocock_level``; cached; Monte Carlo
error about ±1% of alpha). For K = 8, ``a'`` = 0.0144 and the multiplier is 8.25, 5.13, 4.14,
3.68 at n = 3..6 against Lai's 10.33, 6.68, 5.66, 5.15. The price: the guarantee covers K looks
only (a design property, like ``--max-rounds``); n = 2 is never a look (one df buys nothing).

Decision per concurrency, with an equivalence margin ``m`` (``--margin 1%``): ``better`` when the
whole sequence is above 0, ``worse`` when below, ``equivalent`` when it lies inside
``(−ln(1+m), ln(1+m))``, else ``undecided``. The level holds per concurrency.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from pydantic import computed_field

from servelab.core.stats import mean, numpy_module, sample_std, scipy_stats, t_quantile

__all__ = [
    "BOUNDARIES",
    "DEFAULT_BOUNDARY",
    "DEFAULT_MIXTURE",
    "Boundary",
    "ConfidenceSequence",
    "Decision",
    "confidence_sequence",
    "cs_multiplier",
    "decide",
    "first_decision",
    "looks_for",
    "pocock_level",
    "rci_multiplier",
]


class Decision(StrEnum):
    """What the stopping rule decided at one concurrency (stored: values unchanged)."""

    BETTER = "better"
    WORSE = "worse"
    EQUIVALENT = "equivalent"
    UNDECIDED = "undecided"


class Boundary(StrEnum):
    """The stopping rule's interval: Pocock's repeated intervals for a set number of looks, or
    Lai's confidence sequence for any number."""

    POCOCK = "pocock"
    LAI = "lai"


DEFAULT_MIXTURE = 20.0
METHOD = "Lai (1976) confidence sequence, Gaussian mean with unknown variance"
POCOCK_METHOD = "Pocock repeated confidence intervals on Student's t (Jennison & Turnbull 1989)"
BOUNDARIES = tuple(Boundary)
DEFAULT_BOUNDARY = Boundary.POCOCK
FIRST_LOOK = 3
POCOCK_SIMS = 200_000
POCOCK_SEED = 20260101


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
    looks: int | None = None  # the most looks of a Pocock boundary (None: Lai, any number)

    @property
    def ratio(self) -> float:
        return math.exp(self.estimate) if not math.isnan(self.estimate) else math.nan

    @computed_field  # type: ignore[prop-decorator]
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


@lru_cache(maxsize=64)
def pocock_level(looks: int, alpha: float = 0.05) -> float:
    """The per-look two-sided level ``a'`` of Pocock's boundary on t for looks at n = 3..looks:
    ``P(min_n p_n <= a') = alpha`` under the null, by seeded simulation (deterministic)."""
    if looks < FIRST_LOOK:
        return math.nan
    np = numpy_module()
    x = np.random.default_rng(POCOCK_SEED).standard_normal((POCOCK_SIMS, looks))
    # running sums a look at a time (the same additions as cumsum, so the same level): one
    # copy of the draws, not six (50 looks: 80 MB, not 480)
    total, squares, mins = np.zeros(POCOCK_SIMS), np.zeros(POCOCK_SIMS), np.ones(POCOCK_SIMS)
    for k in range(1, looks + 1):
        column = x[:, k - 1]
        total, squares = total + column, squares + column * column
        if k >= FIRST_LOOK:
            mean = total / k
            var = (squares - k * mean * mean) / max(k - 1, 1)
            t = np.abs(mean) / np.sqrt(var / k)
            mins = np.minimum(mins, 2.0 * scipy_stats().t.sf(t, k - 1))
    return float(np.quantile(mins, alpha))


@lru_cache(maxsize=1024)
def rci_multiplier(n: int, looks: int, *, alpha: float = 0.05) -> float:
    """The half-width of Pocock's repeated interval in units of ``s/√n`` at look ``n`` of
    ``looks`` (inf before the first look at n = 3, and past the last)."""
    if n < FIRST_LOOK or n > looks:
        return math.inf
    return t_quantile(1.0 - pocock_level(looks, alpha) / 2.0, n - 1)


def confidence_sequence(
    values: Sequence[float],
    *,
    alpha: float = 0.05,
    mixture: float = DEFAULT_MIXTURE,
    looks: int | None = None,
) -> ConfidenceSequence:
    """The interval on the mean of ``values`` valid at every look: Pocock's repeated interval
    when the most ``looks`` is given, else Lai's confidence sequence (any number of looks)."""
    n = len(values)
    m = mean(values)
    if looks is None:
        mult, method, mix = cs_multiplier(n, alpha=alpha, mixture=mixture), METHOD, mixture
    else:
        mult, method, mix = rci_multiplier(n, looks, alpha=alpha), POCOCK_METHOD, math.nan
    sd = sample_std(values) if n >= 2 else math.nan
    if math.isinf(mult) or math.isnan(sd) or sd == 0.0:
        return ConfidenceSequence(n, m, -math.inf, math.inf, alpha, mix, method, looks)
    half = mult * sd / math.sqrt(n)
    return ConfidenceSequence(n, m, m - half, m + half, alpha, mix, method, looks)


def looks_for(boundary: str, max_rounds: int) -> int | None:
    """The ``looks`` argument of a boundary: ``max_rounds`` for Pocock, None for Lai."""
    if boundary not in BOUNDARIES:
        raise ValueError(f"unknown boundary {boundary!r}: one of {', '.join(BOUNDARIES)}")
    return max_rounds if boundary == Boundary.POCOCK else None


def decide(cs: ConfidenceSequence, margin: float | None) -> Decision:
    """``better``/``worse`` when the sequence excludes 0, ``equivalent`` inside the margin."""
    if cs.low > 0.0:
        return Decision.BETTER
    if cs.high < 0.0:
        return Decision.WORSE
    if margin is not None and margin > 0:
        bound = math.log1p(margin)
        if -bound < cs.low and cs.high < bound:
            return Decision.EQUIVALENT
    return Decision.UNDECIDED


def first_decision(
    values: Sequence[float],
    margin: float | None,
    *,
    alpha: float = 0.05,
    mixture: float = DEFAULT_MIXTURE,
    looks: int | None = None,
) -> tuple[int | None, Decision]:
    """The first n at which the sequence over ``values[:n]`` decided, and the decision
    (``(None, "undecided")`` when it never did); ``looks`` as in :func:`confidence_sequence`."""
    for n in range(2, len(values) + 1):
        cs = confidence_sequence(values[:n], alpha=alpha, mixture=mixture, looks=looks)
        decision = decide(cs, margin)
        if decision != Decision.UNDECIDED:
            return n, decision
    return None, Decision.UNDECIDED
