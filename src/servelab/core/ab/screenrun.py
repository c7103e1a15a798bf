"""A tune's screening phase (pure): what ``servelab tune --screen`` runs before it tunes.

**Factors.** Each knob of a screened tune has exactly two values, its low (the first, ``-1``) and
its high (``+1``); the design is :func:`servelab.core.ab.factorial.screening_design` of them
(resolution IV or the full factorial). Each run of the design is an arm, labelled as a tune's
grid labels its arms (``NAME=VALUE, NAME=VALUE``).

**Blocks.** Every block visits every run once, in the seeded Williams order of all the runs
(:func:`servelab.core.ab.tune.visit_order`); none is ever dropped, so the contrasts stay balanced.
After each complete block every level's contrasts are estimated
(:func:`~servelab.core.ab.factorial.estimate_effects`, at ``alpha / L`` for ``L`` levels: each
level's contrasts then split it again). The phase stops when every contrast of every level is
active or negligible, or after ``max_rounds`` blocks (:func:`screen_stopped`).

**The follow-up.** A factor goes on to the tune when some level cannot rule it out
(:func:`~servelab.core.ab.factorial.follow_up` at each level, merged by :func:`merged_follow_up`);
the tune's arms are every combination of those factors' levels, every other knob held at its low
value (:func:`servelab.core.ab.tunerun.follow_up_arms`). Nothing left: no tune, the knobs' original
values are kept.

The phase's state is its visits, as the tune's is: :mod:`servelab.core.ab.tunerun` replays them
(``screen``), so ``tune --resume`` finds the same next block or the same follow-up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servelab.core.ab.factorial import (
    Design,
    EffectEstimate,
    EffectStatus,
    Factor,
    FollowUp,
    follow_up,
)
from servelab.core.ab.result import ArmVisit
from servelab.core.ab.tune import TuneRule

__all__ = [
    "LevelEffects",
    "Screening",
    "merged_follow_up",
    "screen_factors",
    "screen_stopped",
]


def screen_factors(knobs: Sequence[tuple[str, Sequence[str]]]) -> tuple[Factor, ...]:
    """Each ``(name, values)`` as a factor: exactly two values, the first its low one (a
    ValueError names the knob that has not)."""
    for name, values in knobs:
        if len(values) != 2:
            raise ValueError(
                f"screening takes each knob at exactly two values: {name} has {len(values)}"
            )
    return tuple(Factor(name, values[0], values[1]) for name, values in knobs)


def _run_label(design: Design, run: int) -> str:
    """Run ``run`` named as a tune's grid names an arm: ``NAME=VALUE, NAME=VALUE``."""
    return ", ".join(f"{name}={value}" for name, value in design.settings(run))


@dataclass(frozen=True)
class LevelEffects:
    """One level's contrasts after the screening's complete blocks."""

    level: int
    effects: tuple[EffectEstimate, ...]


@dataclass(frozen=True)
class Screening:
    """The phase: its design, its visits in the order they ran, each level's estimates after
    its last complete block (empty before the first), and its follow-up once it stopped (None:
    still running). Stored in the tune's record through the codec."""

    design: Design
    visits: tuple[ArmVisit, ...] = ()
    levels: tuple[LevelEffects, ...] = ()
    follow_up: FollowUp | None = None

    @property
    def labels(self) -> tuple[str, ...]:
        """The runs' labels, in run order."""
        return tuple(_run_label(self.design, r) for r in range(len(self.design.runs)))

    def values(self, label: str) -> tuple[str, ...]:
        """The knobs' values of the run ``label``, in the knobs' order."""
        run = self.labels.index(label)
        return tuple(value for _, value in self.design.settings(run))

    @property
    def blocks(self) -> int:
        """Blocks begun (the last may be incomplete)."""
        return max((v.round + 1 for v in self.visits), default=0)


def screen_stopped(levels: Sequence[LevelEffects], blocks: int, rule: TuneRule) -> bool:
    """Whether the phase stops after ``blocks`` complete blocks: every contrast of every level
    active or negligible, or the block budget spent."""
    if blocks >= rule.max_rounds:
        return True
    return bool(levels) and all(e.status is not EffectStatus.UNDECIDED
                                for lvl in levels for e in lvl.effects)  # fmt: skip


def merged_follow_up(design: Design, levels: Sequence[LevelEffects]) -> FollowUp:
    """What no level can rule out: the factors and interactions some level leaves open, in the
    design's order; decided only when every level is."""
    each = [follow_up(design, lvl.effects) for lvl in levels]
    names = [f.name for f in design.factors]
    factors = {n for f in each for n in f.factors}
    pairs = {p for f in each for p in f.interactions}
    return FollowUp(
        tuple(n for n in names if n in factors),
        tuple(sorted(pairs, key=lambda p: (names.index(p[0]), names.index(p[1])))),
        tuple(n for n in names if n not in factors),
        all(f.decided for f in each),
    )
