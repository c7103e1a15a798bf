"""``tune --plan``: what the tune rule would take at each level, simulated on the noise of the
A/Bs recorded for the service (:func:`servelab.core.ab.tunecheck.check_rule`, one arm better than
the others by the effect asked); nothing is run."""

from __future__ import annotations

import math
from dataclasses import dataclass

from servelab.core.ab.tunecheck import RuleCheck, check_rule
from servelab.core.ab.tunerun import grid, level_rule
from servelab.io.ledger.ledger import Ledger
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
    ``ab_ids``."""

    arms: int
    effect: float
    runs: int
    ab_ids: tuple[int, ...]
    levels: tuple[LevelPlan, ...]


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
    return TunePlan(len(labels), effect, runs, recorded.ab_ids, tuple(plans))
