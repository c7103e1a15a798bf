"""A/B verdicts and curve anomalies (pure).

An A/B experiment measures one knob at two values (a *baseline* and a *candidate*) at several
concurrencies, each arm repeated. Per concurrency the candidate/baseline ratio of mean output-token
throughput gets Fieller's confidence interval (:func:`servelab.core.stats.ratio_interval`) and a
verdict: ``better`` (the whole interval above 1), ``worse`` (below 1), ``no significant
difference`` (the interval holds 1), or ``inconclusive`` (too few repeats, unbounded interval).

Within one arm, throughput should not fall as concurrency rises; where it does (the reference
incident's C96 < C80 with the knob at 256, a wave-quantization effect) that is an anomaly.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from servelab.core.stats import ratio_interval, summarize

__all__ = [
    "BETTER",
    "INCONCLUSIVE",
    "NO_DIFFERENCE",
    "WORSE",
    "Anomaly",
    "Comparison",
    "compare_arms",
    "find_anomalies",
]

BETTER = "better"
WORSE = "worse"
NO_DIFFERENCE = "no significant difference"
INCONCLUSIVE = "inconclusive"

_VERDICTS = {"A>B": BETTER, "A<B": WORSE, "not significant": NO_DIFFERENCE}


@dataclass(frozen=True, slots=True)
class Comparison:
    """Candidate vs baseline at one concurrency: ratio of mean throughputs with its interval."""

    concurrency: int
    ratio: float
    ci: tuple[float, float]
    confidence: float
    verdict: str
    method: str
    n_baseline: int
    n_candidate: int
    baseline: str
    candidate: str
    reason: str = ""

    @property
    def change(self) -> float:
        """The relative change ``ratio - 1`` (``+0.128`` for +12.8%)."""
        return self.ratio - 1.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ci"] = list(self.ci)
        return data


@dataclass(frozen=True, slots=True)
class Anomaly:
    """Within one arm, throughput at ``concurrency`` is below the throughput at ``previous``."""

    arm: str
    concurrency: int
    previous: int
    throughput: float
    previous_throughput: float
    kind: str = "non_monotonic"

    @property
    def drop(self) -> float:
        """Relative drop against the lower concurrency (``0.03`` for 3% lower)."""
        return 1.0 - self.throughput / self.previous_throughput

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "drop": self.drop}


def compare_arms(
    baseline: Mapping[int, Sequence[float]],
    candidate: Mapping[int, Sequence[float]],
    *,
    baseline_label: str,
    candidate_label: str,
    confidence: float = 0.95,
) -> list[Comparison]:
    """One :class:`Comparison` per concurrency present in both arms, in ascending order."""
    out = []
    for conc in sorted(set(baseline) & set(candidate)):
        b, c = list(baseline[conc]), list(candidate[conc])
        interval = ratio_interval(c, b, confidence=confidence)
        out.append(
            Comparison(
                concurrency=conc,
                ratio=interval.ratio,
                ci=(interval.low, interval.high),
                confidence=confidence,
                verdict=_VERDICTS.get(interval.verdict, INCONCLUSIVE),
                method=interval.method,
                n_baseline=len(b),
                n_candidate=len(c),
                baseline=baseline_label,
                candidate=candidate_label,
                reason=interval.reason,
            )
        )
    return out


def find_anomalies(arm: str, throughput: Mapping[int, Sequence[float]]) -> list[Anomaly]:
    """Concurrencies whose mean throughput is below that of the next lower concurrency."""
    means = [(c, summarize(list(v)).mean) for c, v in sorted(throughput.items()) if v]
    return [
        Anomaly(arm, conc, prev_conc, thr, prev_thr)
        for (prev_conc, prev_thr), (conc, thr) in itertools.pairwise(means)
        if thr < prev_thr
    ]
