"""The design of an A/B (pure): the order of visits, how many rounds a plan needs, what it costs.

**Order.** A round is one visit of each arm. Its two visits run in a counterbalanced order:

- ``abba`` (default): rounds alternate baseline-first and candidate-first (A B | B A | A B …), so
  over every two rounds a linear drift (thermal, a neighbour, cache growth) adds the same to both
  arms instead of always favouring the arm that runs second;
- ``random``: each round's order is a fair coin drawn from ``random.Random(seed)`` (recorded).

**Plan.** From the noise of earlier arms at a concurrency (the pooled within-arm standard
deviation of ln throughput across visits, ``s_arm``), the per-round log ratio has standard
deviation at most ``σ_d = √2 · s_arm`` (pairing only removes the part the two visits share). The
fixed design's rounds for a two-sided paired t-test at level ``alpha`` to detect a change
``effect`` with probability ``power`` is the smallest n with
``P(|T| > t_{1−alpha/2, n−1}) >= power``, ``T`` noncentral t with df ``n − 1`` and noncentrality
``√n · ln(1 + effect) / σ_d`` (``scipy.stats.nct``). For ``--until-decided`` the same noise
drives a seeded simulation of the stopping rule: the rounds by which it decides in ``power`` of
the simulated A/Bs, and the mean rounds it spends.

**Equivalence.** A fixed design that is to call a concurrency *equivalent* within a margin ``m``
(its 95% paired t interval inside ``±ln(1 + m)``, the same interval as its verdict) needs the
rounds of two one-sided tests (Schuirmann 1987, TOST) at ``alpha/2`` each: the smallest n with
``P(|mean d| + t_{1−alpha/2, n−1} · s/√n < ln(1 + m)) >= power`` under the true change
(0 by default). The probability is exact for Gaussian log ratios: ``mean d`` is normal and
independent of ``s²``, a scaled chi-square; the expectation over ``s`` is a midpoint rule on
``chi2.ppf`` at 2000 quantiles (no randomness).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from servelab.core.ab.sequential import DEFAULT_BOUNDARY, first_decision, looks_for
from servelab.core.stats import numpy_module, scipy_stats, t_quantile

__all__ = [
    "ORDERS",
    "ORDER_ABBA",
    "DesignCost",
    "Noise",
    "Order",
    "RoundsPlan",
    "SequentialPlan",
    "VisitCost",
    "fixed_design",
    "pooled_log_noise",
    "pooled_log_ratio_sd",
    "round_order",
    "rounds_for_equivalence",
    "rounds_for_power",
    "sequential_rounds_for_power",
    "spent",
    "visit_plan",
]


class Order(StrEnum):
    """How a round's two visits are ordered (stored: values unchanged)."""

    ABBA = "abba"
    RANDOM = "random"


ORDERS = tuple(Order)
#: the default order
ORDER_ABBA = Order.ABBA
BASELINE, CANDIDATE = "baseline", "candidate"


def round_order(rounds: int, scheme: str, seed: int = 0) -> list[tuple[str, str]]:
    """The order of the two visits in each of ``rounds`` rounds (``("baseline", "candidate")``
    or the reverse); deterministic for a scheme and seed, so a resumed A/B finds its plan."""
    if scheme == Order.ABBA:
        return [
            (BASELINE, CANDIDATE) if r % 2 == 0 else (CANDIDATE, BASELINE) for r in range(rounds)
        ]
    if scheme == Order.RANDOM:
        rng = random.Random(seed)
        return [(BASELINE, CANDIDATE) if rng.random() < 0.5 else (CANDIDATE, BASELINE)
                for _ in range(rounds)]  # fmt: skip
    raise ValueError(f"unknown order {scheme!r}: one of {', '.join(ORDERS)}")


def visit_plan(rounds: int, scheme: str, seed: int = 0) -> list[tuple[int, str]]:
    """Every visit in order: ``(round, "baseline" | "candidate")``."""
    return [(r, arm) for r, pair in enumerate(round_order(rounds, scheme, seed)) for arm in pair]


@dataclass(frozen=True, slots=True)
class Noise:
    """Pooled within-arm standard deviation of ln throughput at one concurrency."""

    concurrency: int
    sd_log: float
    df: int
    groups: int
    method: str = "pooled within-arm SD of ln throughput across visits"
    #: the per-round log ratios' own pooled SD and its df, when recorded rounds give one
    paired_sd: float = math.nan
    paired_df: int = 0

    @property
    def sd_log_ratio(self) -> float:
        """The per-round log ratio's SD: measured from recorded rounds when they give 2 df or
        more, else the bound √2 · the arm's (pairing only removes what both visits share)."""
        if self.paired_df >= 2 and not math.isnan(self.paired_sd):
            return self.paired_sd
        return math.sqrt(2.0) * self.sd_log


def pooled_log_noise(concurrency: int, groups: Sequence[Sequence[float]]) -> Noise:
    """Pool the variance of ln throughput over every arm (group) with two or more visits."""
    ss, df, used = 0.0, 0, 0
    for g in groups:
        logs = [math.log(v) for v in g if v > 0]
        if len(logs) < 2:
            continue
        m = sum(logs) / len(logs)
        ss += sum((x - m) ** 2 for x in logs)
        df += len(logs) - 1
        used += 1
    return Noise(concurrency, math.sqrt(ss / df) if df else math.nan, df, used)


def pooled_log_ratio_sd(groups: Sequence[Sequence[float]]) -> tuple[float, int]:
    """Pool the variance of per-round log ratios over A/Bs (each group one A/B, around its own
    mean): ``(sd, df)``; ``(nan, 0)`` without two rounds in some A/B."""
    ss, df = 0.0, 0
    for g in groups:
        if len(g) < 2:
            continue
        m = sum(g) / len(g)
        ss += sum((x - m) ** 2 for x in g)
        df += len(g) - 1
    return (math.sqrt(ss / df), df) if df else (math.nan, 0)


@dataclass(frozen=True, slots=True)
class RoundsPlan:
    """How many rounds of the fixed design detect ``effect`` with ``power`` at ``alpha``."""

    concurrency: int
    effect: float
    power: float
    alpha: float
    sd_log_ratio: float
    rounds: int | None  # None: more than max_rounds, or no noise estimate
    achieved_power: float
    method: str = "two-sided paired t-test on log ratios, power by the noncentral t"


def _power(n: int, delta: float, alpha: float) -> float:
    crit = t_quantile(1.0 - alpha / 2.0, n - 1)
    nc = delta * math.sqrt(n)
    # The lower tail as the upper tail of the mirrored law: scipy's nct.cdf far below a large
    # noncentrality returns nan (scipy 1.x), the mirrored sf gives its true ~0.
    stats = scipy_stats()
    return float(stats.nct(n - 1, nc).sf(crit) + stats.nct(n - 1, -nc).sf(crit))


def rounds_for_power(
    noise: Noise, *, effect: float, power: float = 0.8, alpha: float = 0.05, max_rounds: int = 200
) -> RoundsPlan:
    """The smallest n (2..max_rounds) whose power reaches ``power`` for a change ``effect``."""
    sd = noise.sd_log_ratio
    plan = RoundsPlan(noise.concurrency, effect, power, alpha, sd, None, math.nan)
    if math.isnan(sd) or sd <= 0 or effect == 0:
        return plan
    delta = abs(math.log1p(effect)) / sd
    achieved = math.nan
    for n in range(2, max_rounds + 1):
        achieved = _power(n, delta, alpha)
        if achieved >= power:
            return RoundsPlan(noise.concurrency, effect, power, alpha, sd, n, achieved)
    return RoundsPlan(noise.concurrency, effect, power, alpha, sd, None, achieved)


def _equivalence_power(n: int, sd: float, bound: float, true: float, alpha: float) -> float:
    stats, np = scipy_stats(), numpy_module()
    nu, crit = n - 1, t_quantile(1.0 - alpha / 2.0, n - 1)
    se = sd / math.sqrt(n)
    s = sd * np.sqrt(stats.chi2.ppf((np.arange(_QUANTILES) + 0.5) / _QUANTILES, nu) / nu)
    half = bound - crit * s / math.sqrt(n)  # the mean must be within ±half of 0
    inside = stats.norm.cdf((half - true) / se) - stats.norm.cdf((-half - true) / se)
    return float(np.mean(np.where(half > 0, inside, 0.0)))


_QUANTILES = 2000


def rounds_for_equivalence(
    noise: Noise,
    *,
    margin: float,
    power: float = 0.8,
    alpha: float = 0.05,
    true_effect: float = 0.0,
    max_rounds: int = 200,
) -> RoundsPlan:
    """The smallest n (2..max_rounds) whose 95% paired t interval falls inside ``±ln(1+margin)``
    with probability ``power`` when the true change is ``true_effect`` (TOST, Schuirmann 1987)."""
    sd = noise.sd_log_ratio
    method = "fixed-n equivalence (TOST at alpha/2 each side), exact power"
    plan = RoundsPlan(noise.concurrency, margin, power, alpha, sd, None, math.nan, method)
    if math.isnan(sd) or sd <= 0 or margin <= 0:
        return plan
    bound, true = math.log1p(margin), math.log1p(true_effect)
    achieved = math.nan
    for n in range(2, max_rounds + 1):
        achieved = _equivalence_power(n, sd, bound, true, alpha)
        if achieved >= power:
            return RoundsPlan(noise.concurrency, margin, power, alpha, sd, n, achieved, method)
    return RoundsPlan(noise.concurrency, margin, power, alpha, sd, None, achieved, method)


@dataclass(frozen=True, slots=True)
class VisitCost:
    """What one visit took: set + restart + verify (``overhead_s``), then a run per C."""

    overhead_s: float
    bench_s: dict[int, float]

    @property
    def seconds(self) -> float:
        return self.overhead_s + sum(self.bench_s.values())


@dataclass(frozen=True, slots=True)
class DesignCost:
    """Rounds, visits and wall minutes of a design; GPU-minutes = minutes × GPUs held."""

    rounds: int
    visits: int
    minutes: float
    gpu_minutes: float
    estimated: bool


def spent(costs: Sequence[VisitCost], rounds: int, gpus: int) -> DesignCost:
    """What the visits actually cost."""
    minutes = sum(c.seconds for c in costs) / 60.0
    return DesignCost(rounds, len(costs), minutes, minutes * gpus, False)


def fixed_design(
    costs: Sequence[VisitCost],
    rounds: int,
    concurrencies: Sequence[int],
    gpus: int,
    *,
    arms: int = 2,
) -> DesignCost:
    """The fixed design of ``rounds`` rounds of ``arms`` visits at every concurrency, priced
    from the measured visits: the mean overhead per visit plus the mean run time of each
    concurrency."""
    if not costs:
        return DesignCost(rounds, arms * rounds, math.nan, math.nan, True)
    overhead = sum(c.overhead_s for c in costs) / len(costs)
    per_c = []
    for conc in concurrencies:
        runs = [c.bench_s[conc] for c in costs if conc in c.bench_s]
        per_c.append(sum(runs) / len(runs) if runs else math.nan)
    minutes = arms * rounds * (overhead + sum(per_c)) / 60.0
    return DesignCost(rounds, arms * rounds, minutes, minutes * gpus, True)


@dataclass(frozen=True, slots=True)
class SequentialPlan:
    """Rounds by which the stopping rule decides a true change ``effect`` in ``power`` of
    ``sims`` seeded simulated A/Bs (N(ln(1+effect), σ_d) per-round log ratios), and the mean
    rounds it takes (capped at ``max_rounds``)."""

    concurrency: int
    effect: float
    power: float
    rounds: int | None
    mean_rounds: float
    decided_share: float
    sims: int
    seed: int
    method: str = "seeded simulation of the confidence sequence (Lai 1976)"


def sequential_rounds_for_power(
    noise: Noise,
    *,
    effect: float,
    power: float = 0.8,
    alpha: float = 0.05,
    margin: float | None = None,
    max_rounds: int = 20,
    sims: int = 1000,
    seed: int = 0,
    boundary: str = DEFAULT_BOUNDARY,
) -> SequentialPlan:
    """Simulate the stopping rule (``boundary``, at most ``max_rounds`` looks) on Gaussian
    per-round log ratios with the recorded noise."""
    sd = noise.sd_log_ratio
    if math.isnan(sd) or sd <= 0:
        return SequentialPlan(noise.concurrency, effect, power, None, math.nan, 0.0, 0, seed)
    rng = numpy_module().random.default_rng(seed)
    draws = rng.normal(math.log1p(effect), sd, size=(sims, max_rounds))
    looks = looks_for(boundary, max_rounds)
    stops = [first_decision(list(map(float, row)), margin, alpha=alpha, looks=looks)[0]
             for row in draws]  # fmt: skip
    decided = sorted(n for n in stops if n is not None)
    need = math.ceil(power * sims)
    rounds = decided[need - 1] if len(decided) >= need else None
    mean_rounds = sum(n if n is not None else max_rounds for n in stops) / sims
    return SequentialPlan(noise.concurrency, effect, power, rounds, mean_rounds,
                          len(decided) / sims, sims, seed)  # fmt: skip
