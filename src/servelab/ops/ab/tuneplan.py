"""``tune --plan``: what the tune rule would take at each level, simulated on the noise of the
A/Bs recorded for the service (:func:`servelab.core.ab.tunecheck.check_rule`, one arm better than
the others by the effect asked), and, with ``--max-minutes``, the first block priced as ``tune``
prices it before its first visit (:mod:`servelab.ops.ab.budget`); nothing is run."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

from servelab.core.ab.tunecheck import RuleCheck, check_rule
from servelab.core.ab.tuneevents import PricedFrom, TuneOverBudget
from servelab.core.ab.tunerun import grid, level_rule
from servelab.core.ledger.codec import OMITTED_IF_NONE
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tunes import TuneStore
from servelab.ops.ab.budget import over_budget, recorded_visit_s
from servelab.ops.ab.plan import plan_ab
from servelab.ops.ab.tuneconfig import TuneConfig

__all__ = ["LevelPlan", "TunePlan", "plan_tune"]


@dataclass(frozen=True)
class LevelPlan:
    """One level: the recorded noise (the SD of the per-round log ratio, measured or bounded,
    :attr:`~servelab.core.ab.design.Noise.sd_log_ratio`) and the rule simulated on it (None: no
    recorded noise to simulate from)."""

    level: int
    sd_log_ratio: float
    check: RuleCheck | None


@dataclass(frozen=True)
class TunePlan:
    """``tune --plan``: for ``arms`` arms, one better than the others by ``effect``, what the
    rule takes at each level (``runs`` seeded simulated tunes), from the noise of the A/Bs
    ``ab_ids``; ``over_budget``: the first block past ``--max-minutes``, priced at the latest
    recorded tune's mean visit (None: within it, no budget, or no tune recorded)."""

    arms: int
    effect: float
    runs: int
    ab_ids: tuple[int, ...]
    levels: tuple[LevelPlan, ...]
    over_budget: Annotated[TuneOverBudget | None, OMITTED_IF_NONE] = None


def plan_tune(ledger: Ledger, cfg: TuneConfig, *, effect: float, runs: int = 200) -> TunePlan:
    """The plan for ``cfg``'s arms (see the module docstring)."""
    first = cfg.knobs[0]
    recorded = plan_ab(ledger, service=first.service,
                       knob=first.knob if len(cfg.knobs) == 1 else None,
                       concurrencies=cfg.levels, effect=effect, max_rounds=cfg.max_rounds,
                       seed=cfg.order_seed, boundary=cfg.boundary)  # fmt: skip
    labels = [a.label for a in grid(cfg.knobs)]
    means = dict.fromkeys(labels, -math.log1p(effect)) | {labels[-1]: 0.0}
    rule = level_rule(cfg.rule(), len(cfg.levels))
    plans = []
    for noise in recorded.noise:
        sd = noise.sd_log_ratio
        check = None
        if math.isfinite(sd) and sd > 0:
            # A block's log ratio is the difference of two visits: its SD is sqrt(2) a visit's.
            check = check_rule(means, sd / math.sqrt(2.0), rule, runs, seed=cfg.order_seed)
        plans.append(LevelPlan(noise.concurrency, sd, check))
    price = None if cfg.max_minutes is None else recorded_visit_s(TuneStore(ledger))
    late = None
    if price is not None and cfg.max_minutes is not None:
        late = over_budget(len(labels), cfg.max_rounds, price, cfg.max_minutes,
                           PricedFrom.RECORDED)  # fmt: skip
    return TunePlan(len(labels), effect, runs, recorded.ab_ids, tuple(plans), late)
