"""``ab --plan``: how many rounds an A/B needs, from the noise of the A/Bs already recorded.

With a margin, the fixed design's rounds to call a concurrency whose true change is 0
*equivalent* (TOST) are given too: a fixed design that is to deliver a "better" where the change
is ``effect`` and an "equivalent" where it is 0 needs the larger of the two, at every
concurrency (``fixed_rounds``) — the fair fixed counterpart of ``--until-decided --margin``.

For each concurrency the noise is the pooled within-arm SD of ln throughput over every arm of the
earlier A/Bs of the same service in the ledger (:func:`servelab.core.ab.design.pooled_log_noise`)
and, where their visits give complete rounds, the pooled SD of the per-round log ratios itself
(what the paired analysis and the stopping rule see; used when it has 2 df or more);
from it the fixed design's rounds (noncentral t) and the stopping rule's rounds (seeded
simulation) for a given change and power. Nothing is run on the deployment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from servelab.core.ab.design import (
    Noise,
    RoundsPlan,
    SequentialPlan,
    pooled_log_noise,
    pooled_log_ratio_sd,
    rounds_for_equivalence,
    rounds_for_power,
    sequential_rounds_for_power,
)
from servelab.core.ab.record import AbRunRecord
from servelab.core.ab.result import AbResult
from servelab.core.ab.sequential import DEFAULT_BOUNDARY, Boundary
from servelab.io.ledger.ledger import Ledger

__all__ = ["AbPlan", "plan_ab"]


@dataclass(frozen=True)
class AbPlan:
    """Per concurrency: the recorded noise, the fixed design's and the stopping rule's rounds."""

    service: str
    knob: str | None
    effect: float
    power: float
    alpha: float
    margin: float | None
    max_rounds: int
    ab_ids: tuple[int, ...]
    noise: tuple[Noise, ...] = ()
    fixed: tuple[RoundsPlan, ...] = ()
    sequential: tuple[SequentialPlan, ...] = field(default_factory=tuple)
    equivalence: tuple[RoundsPlan, ...] = field(default_factory=tuple)
    boundary: Boundary = DEFAULT_BOUNDARY

    @property
    def fixed_rounds(self) -> int | None:
        """One fixed n for the whole A/B: the most any concurrency needs, for detection and
        (with a margin) for equivalence; None when one of them has no answer."""
        plans = [*self.fixed, *self.equivalence]
        if not plans or any(p.rounds is None for p in plans):
            return None
        return max(p.rounds for p in plans if p.rounds is not None)


def _round_ratios(result: AbResult, conc: int) -> list[float]:
    """The per-round log ratios candidate/baseline at ``conc`` of one recorded A/B."""
    by_round: dict[int, dict[str, float]] = {}
    for visit in result.visits:
        thr = visit.throughput.get(conc)
        if thr:
            by_round.setdefault(visit.round, {})[visit.arm] = thr
    base, cand = result.baseline, result.candidate
    pairs = [r for r in by_round.values() if base in r and cand in r]
    return [math.log(r[cand] / r[base]) for r in pairs]


def _noise(conc: int, results: list[AbResult]) -> Noise:
    arms = pooled_log_noise(conc, [arm.throughput.get(conc, ()) for r in results for arm in r.arms])
    sd, df = pooled_log_ratio_sd([_round_ratios(r, conc) for r in results])
    return replace(arms, paired_sd=sd, paired_df=df)


def plan_ab(
    ledger: Ledger,
    *,
    service: str,
    knob: str | None,
    concurrencies: tuple[int, ...],
    effect: float,
    power: float = 0.8,
    alpha: float = 0.05,
    margin: float | None = None,
    max_rounds: int = 20,
    seed: int = 0,
    boundary: Boundary = DEFAULT_BOUNDARY,
) -> AbPlan:
    """The plan for ``effect`` (0.05 for +5%) at ``concurrencies`` from the ledger's A/Bs of
    ``service`` (of ``knob`` only, when given and recorded; else of any knob)."""
    runs = ledger.list(AbRunRecord, service=service, knob=knob) if knob else []
    runs = runs or ledger.list(AbRunRecord, service=service)
    noise = tuple(_noise(conc, [run.result for run in runs]) for conc in concurrencies)
    fixed = tuple(rounds_for_power(n, effect=effect, power=power, alpha=alpha) for n in noise)
    sequential = tuple(
        sequential_rounds_for_power(
            n,
            effect=effect,
            power=power,
            alpha=alpha,
            margin=margin,
            max_rounds=max_rounds,
            seed=seed,
            boundary=boundary,
        )
        for n in noise
    )
    equivalence = tuple(
        rounds_for_equivalence(n, margin=margin, power=power, alpha=alpha) for n in noise
    ) if margin else ()  # fmt: skip
    return AbPlan(service, knob, effect, power, alpha, margin, max_rounds,
                  tuple(r.id for r in runs), noise, fixed, sequential, equivalence,
                  boundary)  # fmt: skip
