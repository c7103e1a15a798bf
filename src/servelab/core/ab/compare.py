"""A/B verdicts and curve anomalies (pure).

An A/B experiment measures one knob at two values (a *baseline* and a *candidate*) at several
concurrencies, in rounds: one visit of each arm per round, in a counterbalanced order
(:mod:`servelab.core.ab.design`). Per concurrency three analyses sit side by side:

- **paired** (the verdict, from two complete rounds on): the per-round candidate/baseline ratio,
  its geometric mean and the t interval on the mean log ratio (:mod:`servelab.core.ab.paired`), with
  a bootstrap cross-check for small n;
- **unpaired**: Fieller's interval on the ratio of mean throughputs, treating the visits as
  independent (:func:`servelab.core.stats.ratio_interval`): what the analysis would say without
  pairing (and the verdict when fewer than two rounds are complete);
- **sequential**: the stopping rule's interval on the mean log ratio, valid at every look
  (Pocock's repeated intervals for ``looks`` looks, else Lai's confidence sequence;
  :mod:`servelab.core.ab.sequential`), the stopping rule of ``ab --until-decided``.

The verdict is ``better`` (the whole interval above 1), ``worse`` (below 1), ``no significant
difference`` (the interval holds 1), or ``inconclusive`` (too few rounds, zero variance, unbounded).

Within one arm, throughput should not fall as concurrency rises. A drop ``C(n+1) < C(n)`` is an
anomaly only when it is significant within the arm: Welch's one-sided t-test of the visits at the
two levels at ``alpha`` (0.05), with the 90% interval of the relative drop (its lower end is the
one-sided 95% bound). The reference incident's C96 < C80 with the knob at 256 (wave quantization,
about 3%) is such a drop; noise is not.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from pydantic import computed_field

from servelab.core.ab.paired import PairedRatio, log_ratios, paired_ratio
from servelab.core.ab.sequential import (
    DEFAULT_MIXTURE,
    ConfidenceSequence,
    Decision,
    confidence_sequence,
    decide,
)
from servelab.core.stats import RatioInterval, ratio_interval, summarize, welch_difference

__all__ = [
    "ANOMALY_ALPHA",
    "Anomaly",
    "AnomalyKind",
    "Comparison",
    "Verdict",
    "compare_arms",
    "curve_drops",
    "find_anomalies",
]

ANOMALY_ALPHA = 0.05


class Verdict(StrEnum):
    """Candidate against baseline at one concurrency (stored: values unchanged)."""

    BETTER = "better"
    WORSE = "worse"
    NO_DIFFERENCE = "no significant difference"
    INCONCLUSIVE = "inconclusive"


class AnomalyKind(StrEnum):
    """What is wrong with an arm's curve (stored: values unchanged)."""

    NON_MONOTONIC = "non_monotonic"


_VERDICTS = {"A>B": Verdict.BETTER, "A<B": Verdict.WORSE, "not significant": Verdict.NO_DIFFERENCE}


@dataclass(frozen=True, slots=True)
class Comparison:
    """Candidate vs baseline at one concurrency. ``ratio``/``ci``/``verdict``/``method`` are the
    primary analysis (paired when two rounds are complete, else unpaired); ``paired``,
    ``unpaired`` and ``sequential`` keep each analysis, ``decision`` the stopping rule's.
    (The first A/Bs recorded the first six fields only: the others read as their defaults.)"""

    concurrency: int
    ratio: float
    ci: tuple[float, float]
    verdict: Verdict
    baseline: str
    candidate: str
    confidence: float = 0.95
    method: str = ""
    n_baseline: int = 0
    n_candidate: int = 0
    reason: str = ""
    paired: PairedRatio | None = None
    unpaired: RatioInterval | None = None
    sequential: ConfidenceSequence | None = None
    decision: Decision = Decision.UNDECIDED

    @property
    def change(self) -> float:
        """The relative change ``ratio - 1`` (``+0.128`` for +12.8%)."""
        return self.ratio - 1.0

    @property
    def rounds(self) -> int:
        """Complete rounds (pairs of visits) behind the paired analysis."""
        return min(self.n_baseline, self.n_candidate)


def _primary(
    paired: PairedRatio, unpaired: RatioInterval
) -> tuple[float, tuple[float, float], Verdict, str, str]:
    """Paired from two complete rounds on, else unpaired: ratio, ci, verdict, method, reason."""
    if paired.n >= 2:
        verdict = _VERDICTS.get(paired.verdict, Verdict.INCONCLUSIVE)
        return paired.ratio, paired.ci, verdict, paired.method, paired.reason
    verdict = _VERDICTS.get(unpaired.verdict, Verdict.INCONCLUSIVE)
    ci = (unpaired.low, unpaired.high)
    return unpaired.ratio, ci, verdict, unpaired.method, unpaired.reason


def _compare_one(
    conc: int,
    b: list[float],
    c: list[float],
    labels: tuple[str, str],
    confidence: float,
    margin: float | None,
    seed: int,
    looks: int | None = None,
) -> Comparison:
    unpaired = ratio_interval(c, b, confidence=confidence)
    paired = paired_ratio(b, c, confidence=confidence, seed=seed)
    d = log_ratios(b, c) if all(v > 0 for v in (*b, *c)) else ()
    cs = confidence_sequence(d, alpha=1.0 - confidence, mixture=DEFAULT_MIXTURE, looks=looks)
    ratio, ci, verdict, method, reason = _primary(paired, unpaired)
    return Comparison(
        concurrency=conc,
        ratio=ratio,
        ci=ci,
        confidence=confidence,
        verdict=verdict,
        method=method,
        n_baseline=len(b),
        n_candidate=len(c),
        baseline=labels[0],
        candidate=labels[1],
        reason=reason,
        paired=paired,
        unpaired=unpaired,
        sequential=cs,
        decision=decide(cs, margin),
    )


def compare_arms(
    baseline: Mapping[int, Sequence[float]],
    candidate: Mapping[int, Sequence[float]],
    *,
    baseline_label: str,
    candidate_label: str,
    confidence: float = 0.95,
    margin: float | None = None,
    seed: int = 0,
    looks: int | None = None,
) -> list[Comparison]:
    """One :class:`Comparison` per concurrency present in both arms, in ascending order. The
    i-th value of each arm belongs to round i (visits in the order they ran); ``looks``: the
    stopping rule's most looks (Pocock), None for Lai's sequence."""
    labels = (baseline_label, candidate_label)
    return [
        _compare_one(
            conc,
            list(baseline[conc]),
            list(candidate[conc]),
            labels,
            confidence,
            margin,
            seed,
            looks,
        )
        for conc in sorted(set(baseline) & set(candidate))
    ]


@dataclass(frozen=True, slots=True)
class Anomaly:
    """Within one arm, throughput at ``concurrency`` is below the throughput at ``previous``;
    ``significant`` when Welch's one-sided test says so at ``alpha``; ``drop_ci`` is the 90%
    interval of the relative drop (nan when it cannot be computed)."""

    arm: str
    concurrency: int
    previous: int
    throughput: float
    previous_throughput: float
    kind: AnomalyKind = AnomalyKind.NON_MONOTONIC
    significant: bool = True
    p_value: float = math.nan
    drop_ci: tuple[float, float] = (math.nan, math.nan)
    n: int = 0
    n_previous: int = 0
    alpha: float = ANOMALY_ALPHA
    test: str = ""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def drop(self) -> float:
        """Relative drop against the lower concurrency (``0.03`` for 3% lower)."""
        return 1.0 - self.throughput / self.previous_throughput


def _drop(
    arm: str, prev: int, lo: list[float], conc: int, hi: list[float], alpha: float
) -> Anomaly:
    m_lo, m_hi = summarize(lo).mean, summarize(hi).mean
    test = welch_difference(lo, hi, confidence=1.0 - 2.0 * alpha)
    ci = (-test.high / m_lo, -test.low / m_lo) if test.conclusive else (math.nan, math.nan)
    significant = test.conclusive and test.p_less < alpha
    return Anomaly(arm, conc, prev, m_hi, m_lo, significant=significant, p_value=test.p_less,
                   drop_ci=ci, n=len(hi), n_previous=len(lo), alpha=alpha,
                   test=test.method)  # fmt: skip


def curve_drops(
    arm: str, throughput: Mapping[int, Sequence[float]], *, alpha: float = ANOMALY_ALPHA
) -> list[Anomaly]:
    """Every concurrency whose mean throughput is below the next lower one's, each tested."""
    levels = [(c, list(v)) for c, v in sorted(throughput.items()) if v]
    return [
        _drop(arm, prev, lo, conc, hi, alpha)
        for (prev, lo), (conc, hi) in itertools.pairwise(levels)
        if summarize(hi).mean < summarize(lo).mean
    ]


def find_anomalies(
    arm: str, throughput: Mapping[int, Sequence[float]], *, alpha: float = ANOMALY_ALPHA
) -> list[Anomaly]:
    """The drops of :func:`curve_drops` that are significant within the arm."""
    return [a for a in curve_drops(arm, throughput, alpha=alpha) if a.significant]
