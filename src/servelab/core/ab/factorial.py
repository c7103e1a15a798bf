"""Screening several knobs before a tune: a two-level fractional factorial, its main effects,
and the interactions it cannot rule out (pure).

**The design.** ``k`` factors (1..8), each a knob at two levels: ``-1`` its low value (the
current one), ``+1`` the other. A regular ``2^(k−p)`` fraction runs the full factorial of the
first ``k − p`` factors in standard order and sets each of the other ``p`` to the product of a
generator word of them (``D = ABC``). The candidates per ``k`` are the standard
minimum-aberration fractions (Box, Hunter & Hunter 2005, *Statistics for Experimenters*, 2nd ed.,
ch. 6; the NIST/SEMATECH e-Handbook of Statistical Methods, "fractional factorial designs");
:func:`screening_design` takes the one with the fewest runs whose resolution is at least the one
asked (default IV: no main effect aliased with a two-factor interaction), else the full
factorial. The resolution is computed here, from the defining relation (the shortest word of the
group the generator words span), not copied from a table; a full factorial has none (None).

**Aliases.** Effects of three or more factors are assumed negligible (effect sparsity); each
estimable column of the design (a contrast) then carries the main effects and two-factor
interactions its defining relation aliases together (:func:`contrasts`).

**The analysis.** The runs are visited like a tune's arms, every run once per block in a
Williams order (:func:`servelab.core.ab.tune.visit_order`), none ever dropped (the columns must
stay balanced). A block's contrast is ``c_b = (2/N) Σ_r s_r ln y_r,b``: the change in ln value
from low to high, the block's shared conditions cancelled (each column sums to 0). Over blocks
each contrast gets the anytime-valid interval of :mod:`servelab.core.ab.sequential` (the
:class:`~servelab.core.ab.tune.TuneRule`'s boundary and budget) at ``alpha / m`` for ``m``
contrasts (Bonferroni), so with probability at least ``1 − alpha`` every status below is true:
``active`` when the interval excludes 0, ``negligible`` inside ``±ln(1 + margin)``, else
``undecided``. A negligible contrast rules its effects out only if they do not cancel each other.

**The follow-up.** Every effect in a contrast that is not negligible cannot be ruled out: its
factors go to the follow-up, a tune over every combination of their levels; the other factors
stay at their low value (:func:`follow_up`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import reduce
from itertools import combinations

from servelab.core.ab.sequential import confidence_sequence, looks_for
from servelab.core.ab.tune import TuneRule

__all__ = [
    "FRACTIONS",
    "LETTERS",
    "Contrast",
    "Design",
    "EffectEstimate",
    "EffectStatus",
    "Factor",
    "FollowUp",
    "contrasts",
    "estimate_effects",
    "follow_up",
    "resolution",
    "screening_design",
]

LETTERS = "ABCDEFGH"

#: The fractions per number of factors, fewest runs first (each a tuple of generators).
FRACTIONS: dict[int, tuple[tuple[str, ...], ...]] = {
    3: (("C=AB",),),
    4: (("D=ABC",),),
    5: (("D=AB", "E=AC"), ("E=ABCD",)),
    6: (("D=AB", "E=AC", "F=BC"), ("E=ABC", "F=BCD"), ("F=ABCDE",)),
    7: (
        ("D=AB", "E=AC", "F=BC", "G=ABC"),
        ("E=ABC", "F=BCD", "G=ACD"),
        ("F=ABCD", "G=ABDE"),
        ("G=ABCDEF",),
    ),
    8: (("E=BCD", "F=ACD", "G=ABC", "H=ABD"), ("G=ABCD", "H=ABEF"), ("H=ABCDEFG",)),
}


@dataclass(frozen=True, slots=True)
class Factor:
    """A knob screened at two levels: ``low`` (-1, the current value) and ``high`` (+1)."""

    name: str
    low: str
    high: str


@dataclass(frozen=True, slots=True)
class Design:
    """A two-level design: the factors, its generators (in letters, ``A`` the first factor),
    its resolution (None for a full factorial) and its runs (a sign per factor)."""

    factors: tuple[Factor, ...]
    generators: tuple[str, ...]
    resolution: int | None
    runs: tuple[tuple[int, ...], ...]

    def settings(self, run: int) -> tuple[tuple[str, str], ...]:
        """Run ``run`` as ``(knob, value)`` pairs."""
        return tuple((f.name, f.high if s > 0 else f.low)
                     for f, s in zip(self.factors, self.runs[run], strict=True))  # fmt: skip


def _word(text: str) -> frozenset[int]:
    return frozenset(LETTERS.index(c) for c in text)


def _defining_words(generators: Sequence[str]) -> list[frozenset[int]]:
    """Every non-empty word of the defining relation: the products (symmetric differences) of
    every non-empty set of generator words (``D = ABC`` is the word ``ABCD``)."""
    words = [_word(g.replace("=", "")) for g in generators]
    return [reduce(frozenset.symmetric_difference, group)
            for n in range(1, len(words) + 1) for group in combinations(words, n)]  # fmt: skip


def resolution(generators: Sequence[str]) -> int | None:
    """The length of the shortest word of the defining relation (None: no generator)."""
    return min((len(w) for w in _defining_words(generators)), default=None)


def screening_design(factors: Sequence[Factor], min_resolution: int = 4) -> Design:
    """The fraction with the fewest runs for ``factors`` whose resolution is at least
    ``min_resolution``, else the full factorial."""
    k = len(factors)
    if not 1 <= k <= len(LETTERS) or len({f.name for f in factors}) != k:
        raise ValueError(f"screening takes 1 to {len(LETTERS)} distinct factors, not {k}")
    chosen: tuple[str, ...] = ()
    for generators in FRACTIONS.get(k, ()):
        found = resolution(generators)
        if found is not None and found >= min_resolution:
            chosen = generators
            break
    base = k - len(chosen)
    columns = {LETTERS.index(g[0]): _word(g[2:]) for g in chosen}
    runs = []
    for r in range(2**base):
        signs = [1 if r >> j & 1 else -1 for j in range(base)]
        signs += [math.prod(signs[i] for i in columns[j]) for j in range(base, k)]
        runs.append(tuple(signs))
    return Design(tuple(factors), chosen, resolution(chosen), tuple(runs))


@dataclass(frozen=True, slots=True)
class Contrast:
    """An estimable column: the main effects and two-factor interactions aliased in it (factor
    names; the lowest order first) and its sign in each run."""

    effects: tuple[tuple[str, ...], ...]
    signs: tuple[int, ...]


def _sort_key(effect: frozenset[int]) -> tuple[int, list[int]]:
    return (len(effect), sorted(effect))


def contrasts(design: Design) -> tuple[Contrast, ...]:
    """The columns that carry a main effect or a two-factor interaction, in the order of their
    leading effect (main effects first)."""
    k = len(design.factors)
    words = _defining_words(design.generators)
    low_order = [frozenset(e) for n in (1, 2) for e in combinations(range(k), n)]
    seen: set[frozenset[int]] = set()
    found = []
    for effect in low_order:
        if effect in seen:
            continue
        chain = sorted({effect} | {effect ^ w for w in words if len(effect ^ w) <= 2},
                       key=_sort_key)  # fmt: skip
        seen.update(chain)
        names = tuple(tuple(design.factors[i].name for i in sorted(e)) for e in chain)
        signs = tuple(math.prod(run[i] for i in effect) for run in design.runs)
        found.append(Contrast(names, signs))
    return tuple(found)


class EffectStatus(StrEnum):
    """What the interval says of a contrast."""

    ACTIVE = "active"
    NEGLIGIBLE = "negligible"
    UNDECIDED = "undecided"


@dataclass(frozen=True, slots=True)
class EffectEstimate:
    """A contrast's mean change in ln value from low to high over ``blocks``, its interval
    (infinite while unbounded) and status."""

    contrast: Contrast
    blocks: int
    estimate: float
    low: float
    high: float
    status: EffectStatus


def estimate_effects(
    design: Design, blocks: Sequence[Sequence[float]], rule: TuneRule
) -> tuple[EffectEstimate, ...]:
    """Every contrast's estimate over ``blocks`` (each the positive value of every run, in run
    order), at ``rule.alpha`` split over the contrasts."""
    n = len(design.runs)
    if any(len(b) != n or any(not v > 0 for v in b) for b in blocks):
        raise ValueError(f"each block gives a positive value for each of the {n} runs")
    found = contrasts(design)
    alpha, looks = rule.alpha / len(found), looks_for(rule.boundary, rule.max_rounds)
    logs = [[math.log(v) for v in b] for b in blocks]
    estimates = []
    for c in found:
        per_block = [2.0 / n * sum(s * y for s, y in zip(c.signs, b, strict=True)) for b in logs]
        cs = confidence_sequence(per_block, alpha=alpha, looks=looks)
        if cs.low > 0 or cs.high < 0:
            status = EffectStatus.ACTIVE
        elif -rule.bound < cs.low and cs.high < rule.bound:
            status = EffectStatus.NEGLIGIBLE
        else:
            status = EffectStatus.UNDECIDED
        estimates.append(EffectEstimate(c, len(blocks), cs.estimate, cs.low, cs.high, status))
    return tuple(estimates)


@dataclass(frozen=True, slots=True)
class FollowUp:
    """What the screening leaves: the factors to tune over every combination of their levels,
    the two-factor interactions not ruled out, the factors kept at their low value, and whether
    every contrast was decided (active or negligible)."""

    factors: tuple[str, ...]
    interactions: tuple[tuple[str, str], ...]
    fixed: tuple[str, ...]
    decided: bool


def follow_up(design: Design, estimates: Sequence[EffectEstimate]) -> FollowUp:
    """The factors and interactions the screening cannot rule out."""
    open_effects = [e for est in estimates if est.status is not EffectStatus.NEGLIGIBLE
                    for e in est.contrast.effects]  # fmt: skip
    involved = {name for e in open_effects for name in e}
    names = [f.name for f in design.factors]
    pairs = sorted({(e[0], e[1]) for e in open_effects if len(e) == 2},
                   key=lambda p: (names.index(p[0]), names.index(p[1])))  # fmt: skip
    return FollowUp(
        tuple(n for n in names if n in involved),
        tuple(pairs),
        tuple(n for n in names if n not in involved),
        all(e.status is not EffectStatus.UNDECIDED for e in estimates),
    )
