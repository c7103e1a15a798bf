"""The rule of ``servelab tune``: K arms in blocks, the worse ones dropped as they show (pure).

**Blocks.** A block visits every surviving arm once. Its order is a **Williams design** (Williams
1949, "Experimental designs balanced for the estimation of residual effects of treatments",
Aust. J. Sci. Res. A 2(2)): a Latin square whose rows, taken in turn, put every arm in every
position equally often and let every arm follow every other equally often (over n blocks for n
arms when n is even, 2n when odd), so a linear drift or a carry-over from the previous visit adds
the same to every arm over a cycle. With two arms it is the A/B's ``abba``
(:func:`servelab.core.ab.design.round_order`). The arms are assigned to the square's labels by a
permutation drawn from ``random.Random`` seeded with the rule's seed and the surviving arms, and
the cycle starts again when an arm leaves; ``random`` instead shuffles each block (seeded by the
seed and the block). Either way the order is a function of the state, so a resumed tune finds it.

**The rule: successive elimination on paired anytime-valid intervals.** Every pair of arms
``(i, j)`` has the per-block paired log ratios ``d_b = ln y_i,b − ln y_j,b`` over the blocks both
ran (a block's shared conditions cancel, as in :mod:`servelab.core.ab.paired`), and on their mean
the confidence sequence of :mod:`servelab.core.ab.sequential` (Pocock's repeated intervals over
``max_rounds`` looks by default, Lai's 1976 sequence for any number with ``boundary="lai"``), each
at level ``alpha / P``, ``P = K(K − 1)/2`` (Bonferroni over every pair). After each block the
leader is the survivor with the highest mean ln value (the survivors ran the same blocks), and
a survivor whose interval against the leader lies below 0 is dropped (successive elimination:
Even-Dar, Mannor & Mansour 2006, "Action elimination and stopping conditions for the
multi-armed bandit and reinforcement learning problems", JMLR 7; here with paired intervals
instead of per-arm bounds).
The tune stops with

- ``best`` when one arm is left: every other one was shown worse;
- ``within_margin`` when no survivor's interval against the leader reaches ``+ln(1 + margin)``:
  none can beat the leader by the margin (the (ε, δ)-PAC stop of Even-Dar et al.);
- ``budget`` after ``max_rounds`` blocks otherwise (the leader is then no claim).

**What it guarantees.** Each pair's sequence holds at every look, so with probability at least
``1 − alpha`` (the union bound over the P pairs) every interval of every pair at every block
covers its true mean log ratio, and on that event every statement the result makes is true:
every elimination (the arm is truly worse than the one it lost to), so no arm with the highest
true mean is dropped; an arm ``best`` is the best; a winner ``within_margin`` is less than the
margin below the best; an arm ``equivalent`` is within the margin of the leader; an arm is shown
better than another only when it truly is, so arms the truth ties are never shown one above the
other. Dropping a best arm, or a winner not within the margin, needs a miss of a pair with a best
arm in it: with one best arm, at most ``alpha (K − 1)/P = 2 alpha / K``
(:func:`servelab.core.ab.tunecheck.claimed_bounds`). Assumed: the per-block log ratios of a pair
are independent Gaussian with one variance (the t-based sequences' model). The Bonferroni split
is conservative: with many arms (a grid) prefer few looks or Lai's sequence, since Pocock's level
at ``alpha / P`` is simulated (:func:`~servelab.core.ab.sequential.pocock_level`) and its Monte
Carlo error grows as the level shrinks. ``benchmarks/tune_rule.py`` checks the rates by
simulation (:mod:`servelab.core.ab.tunecheck`).

**Ranking.** Arm ``i`` is shown better than ``j`` when an interval showed it (an elimination, or
the pair's interval over their common blocks at the end above 0), closed transitively: that
relation (``better_than``) is the claim. An arm's ``rank`` is 1 + the number of arms shown
better than it, an order for display: an arm shown better than another always ranks above it,
but two arms can rank apart unordered (a third arm shown better than one of them and not yet
than the other); no rank can both follow every interval shown and keep every tie together.
Survivors are ``equivalent`` when their interval against the leader lies inside
``±ln(1 + margin)``, else ``undecided``.

**Cost.** Every visit is an arm's co-restart: ``visits`` spent against the full design of every
arm in every one of ``max_rounds`` blocks.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from servelab.core.ab.design import Order
from servelab.core.ab.sequential import (
    BOUNDARIES,
    DEFAULT_BOUNDARY,
    FIRST_LOOK,
    confidence_sequence,
    looks_for,
)

__all__ = [
    "METHOD",
    "ORDER_RANDOM",
    "ORDER_WILLIAMS",
    "TUNE_ORDERS",
    "ArmStatus",
    "Comparison",
    "Elimination",
    "RankedArm",
    "TuneCost",
    "TuneOutcome",
    "TuneResult",
    "TuneRule",
    "TuneState",
    "block_order",
    "compare",
    "record_block",
    "start_tune",
    "tune_result",
    "visit_order",
    "williams_rows",
]

ORDER_WILLIAMS = "williams"
#: a fresh seeded shuffle per block (the A/B's random order, for several arms)
ORDER_RANDOM = Order.RANDOM.value
TUNE_ORDERS = (ORDER_WILLIAMS, ORDER_RANDOM)
METHOD = (
    "successive elimination (Even-Dar, Mannor & Mansour 2006) on per-block paired log ratios; "
    "each pair's anytime-valid interval at alpha / (K(K-1)/2) (Bonferroni)"
)


class TuneOutcome(StrEnum):
    """Where a tune stands: still running, or why it stopped."""

    RUNNING = "running"
    BEST = "best"
    WITHIN_MARGIN = "within_margin"
    BUDGET = "budget"


class ArmStatus(StrEnum):
    """An arm at the end (or so far): the leader, equivalent to it, undecided, or dropped."""

    LEADER = "leader"
    EQUIVALENT = "equivalent"
    UNDECIDED = "undecided"
    ELIMINATED = "eliminated"


@dataclass(frozen=True, slots=True)
class TuneRule:
    """The rule's settings: family-wise ``alpha``, the ``margin`` (a ratio, 0.05 = 5%; 0 turns
    the within-margin stop off), the block budget, the interval family, the order and its seed."""

    alpha: float = 0.05
    margin: float = 0.05
    max_rounds: int = 20
    boundary: str = DEFAULT_BOUNDARY
    order: str = ORDER_WILLIAMS
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), not {self.alpha}")
        if self.margin < 0.0:
            raise ValueError(f"the margin must be 0 or more, not {self.margin}")
        if self.max_rounds < FIRST_LOOK:
            raise ValueError(f"max_rounds must be {FIRST_LOOK} or more (the first look)")
        if self.boundary not in BOUNDARIES:
            raise ValueError(f"unknown boundary {self.boundary!r}: one of {', '.join(BOUNDARIES)}")
        if self.order not in TUNE_ORDERS:
            raise ValueError(f"unknown order {self.order!r}: one of {', '.join(TUNE_ORDERS)}")

    @property
    def bound(self) -> float:
        """The margin on the log scale, ``ln(1 + margin)``."""
        return math.log1p(self.margin)

    def pair_alpha(self, arms: int) -> float:
        """Each pair's level: ``alpha`` split over the ``K(K − 1)/2`` pairs of ``arms``."""
        return self.alpha / max(1, arms * (arms - 1) // 2)


@dataclass(frozen=True, slots=True)
class Comparison:
    """``arm`` against ``against`` over the ``blocks`` both ran: the mean log ratio and its
    anytime-valid interval (infinite while unbounded)."""

    arm: str
    against: str
    blocks: int
    estimate: float
    low: float
    high: float

    @property
    def ratio(self) -> float:
        return math.exp(self.estimate) if math.isfinite(self.estimate) else math.nan

    @property
    def ratio_ci(self) -> tuple[float, float]:
        return (math.exp(self.low), math.exp(self.high))  # exp(-inf) = 0, exp(inf) = inf


@dataclass(frozen=True, slots=True)
class Elimination:
    """An arm dropped after ``block``: its interval against ``lost_to``, the leader then."""

    arm: str
    block: int
    lost_to: str
    comparison: Comparison


@dataclass(frozen=True, slots=True)
class TuneState:
    """Everything a tune knows: the arms, the rule, each arm's value in every block it ran
    (blocks 1..n in order), the eliminations so far and the outcome. Stored as it is
    (:mod:`servelab.core.ledger.codec`) for ``--resume``."""

    arms: tuple[str, ...]
    rule: TuneRule
    values: Mapping[str, tuple[float, ...]]
    eliminations: tuple[Elimination, ...] = ()
    outcome: TuneOutcome = TuneOutcome.RUNNING

    @property
    def blocks(self) -> int:
        return max((len(v) for v in self.values.values()), default=0)

    @property
    def survivors(self) -> tuple[str, ...]:
        dropped = {e.arm for e in self.eliminations}
        return tuple(a for a in self.arms if a not in dropped)

    @property
    def leader(self) -> str:
        """The survivor with the highest mean ln value (the first such in ``arms``)."""
        return max(self.survivors, key=lambda a: _mean_log(self.values[a]))

    @property
    def done(self) -> bool:
        return self.outcome is not TuneOutcome.RUNNING


def _mean_log(values: Sequence[float]) -> float:
    return sum(math.log(v) for v in values) / len(values) if values else 0.0


def start_tune(arms: Sequence[str], rule: TuneRule) -> TuneState:
    """A tune of two or more distinct ``arms`` that has run no block."""
    if len(arms) < 2 or len(set(arms)) != len(arms):
        raise ValueError(f"a tune needs two or more distinct arms, not {list(arms)}")
    return TuneState(tuple(arms), rule, {a: () for a in arms})


def williams_rows(n: int) -> list[list[int]]:
    """The rows of a Williams square for ``n`` treatments ``0..n−1``: ``n`` rows when ``n`` is
    even, ``2n`` (the square and its mirror) when odd."""
    first, low, high = [0], 1, n - 1
    for j in range(1, n):
        if j % 2:
            first.append(low)
            low += 1
        else:
            first.append(high)
            high -= 1
    rows = [[(x + r) % n for x in first] for r in range(n)]
    return rows + [row[::-1] for row in rows] if n % 2 else rows


def visit_order(
    arms: Sequence[str], block: int, *, scheme: str, seed: int, cycle_start: int = 0
) -> tuple[str, ...]:
    """The order of ``arms`` in ``block`` (1-based): row ``block − 1 − cycle_start`` of their
    seeded Williams square, or a seeded shuffle (``random``)."""
    if scheme == ORDER_RANDOM:
        return tuple(random.Random(f"{seed}/{block}").sample(list(arms), len(arms)))
    if scheme != ORDER_WILLIAMS:
        raise ValueError(f"unknown order {scheme!r}: one of {', '.join(TUNE_ORDERS)}")
    labels = random.Random(f"{seed}/{'|'.join(arms)}").sample(list(arms), len(arms))
    rows = williams_rows(len(arms))
    return tuple(labels[i] for i in rows[(block - 1 - cycle_start) % len(rows)])


def block_order(state: TuneState) -> tuple[str, ...]:
    """The order of the next block's visits: the survivors' square, its cycle begun at the last
    elimination (ValueError once the tune is done)."""
    if state.done:
        raise ValueError(f"the tune is done ({state.outcome})")
    since = max((e.block for e in state.eliminations), default=0)
    rule = state.rule
    return visit_order(state.survivors, state.blocks + 1, scheme=rule.order, seed=rule.seed,
                       cycle_start=since)  # fmt: skip


def compare(state: TuneState, arm: str, against: str) -> Comparison:
    """``arm`` against ``against`` over their common blocks, at the rule's per-pair level."""
    a, b = state.values[arm], state.values[against]
    n = min(len(a), len(b))
    d = [math.log(x) - math.log(y) for x, y in zip(a[:n], b[:n], strict=True)]
    rule = state.rule
    cs = confidence_sequence(
        d, alpha=rule.pair_alpha(len(state.arms)), looks=looks_for(rule.boundary, rule.max_rounds)
    )
    return Comparison(arm, against, n, cs.estimate, cs.low, cs.high)


def record_block(state: TuneState, values: Mapping[str, float]) -> TuneState:
    """The state after a block that measured ``values`` (every survivor's, all positive):
    the eliminations it shows, then whether the tune stops."""
    if state.done:
        raise ValueError(f"the tune is done ({state.outcome})")
    survivors = state.survivors
    if set(values) != set(survivors) or any(not v > 0 for v in values.values()):
        raise ValueError(f"a block gives a positive value for each of {list(survivors)}")
    grown = {a: (*v, values[a]) if a in values else v for a, v in state.values.items()}
    state = replace(state, values=grown)
    block, leader = state.blocks, state.leader
    against = {a: compare(state, a, leader) for a in survivors if a != leader}
    dropped = tuple(Elimination(a, block, leader, c) for a, c in against.items() if c.high < 0)
    state = replace(state, eliminations=state.eliminations + dropped)
    rest = [c for a, c in against.items() if a in state.survivors]
    rule = state.rule
    if not rest:
        outcome = TuneOutcome.BEST
    elif rule.margin > 0 and all(c.high < rule.bound for c in rest):
        outcome = TuneOutcome.WITHIN_MARGIN
    elif block >= rule.max_rounds:
        outcome = TuneOutcome.BUDGET
    else:
        outcome = TuneOutcome.RUNNING
    return replace(state, outcome=outcome)


# -- the result --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RankedArm:
    """One arm in the ranking: its rank (1 + arms shown better), status, interval against the
    leader (None for the leader), the arms it was shown better than, its visits, and how it
    left (None for a survivor)."""

    arm: str
    rank: int
    status: ArmStatus
    versus_leader: Comparison | None
    better_than: tuple[str, ...]
    visits: int
    elimination: Elimination | None = None


@dataclass(frozen=True, slots=True)
class TuneCost:
    """Blocks run, visits (arm co-restarts) spent, and the full design's: every arm in every
    one of ``max_rounds`` blocks."""

    blocks: int
    visits: int
    full_visits: int


@dataclass(frozen=True, slots=True)
class TuneResult:
    """The outcome, the winner (the leader when the outcome makes a claim, else None), the
    ranking, the eliminations in order, and the cost."""

    outcome: TuneOutcome
    winner: str | None
    leader: str
    ranking: tuple[RankedArm, ...]
    eliminations: tuple[Elimination, ...]
    cost: TuneCost
    rule: TuneRule
    method: str = METHOD


def _shown_better(state: TuneState) -> dict[str, set[str]]:
    """For each arm, the arms an interval showed it better than, closed transitively."""
    better: dict[str, set[str]] = {a: set() for a in state.arms}
    for e in state.eliminations:
        better[e.lost_to].add(e.arm)
    for i, a in enumerate(state.arms):
        for b in state.arms[i + 1 :]:
            c = compare(state, a, b)
            if c.low > 0:
                better[a].add(b)
            elif c.high < 0:
                better[b].add(a)
    changed = True
    while changed:
        changed = False
        for a, below in better.items():
            grown = below.union(*(better[b] for b in below)) - {a}
            if grown != below:
                better[a], changed = grown, True
    return better


def _status(state: TuneState, arm: str, versus: Comparison | None) -> ArmStatus:
    if versus is None:
        return ArmStatus.LEADER
    if arm not in state.survivors:
        return ArmStatus.ELIMINATED
    bound = state.rule.bound
    inside = -bound < versus.low and versus.high < bound
    return ArmStatus.EQUIVALENT if inside else ArmStatus.UNDECIDED


def tune_result(state: TuneState) -> TuneResult:
    """The ranking and the claims the state supports (so far, while running)."""
    leader, better = state.leader, _shown_better(state)
    how = {e.arm: e for e in state.eliminations}
    ranked = []
    for arm in state.arms:
        versus = None if arm == leader else compare(state, arm, leader)
        rank = 1 + sum(arm in below for below in better.values())
        ranked.append(RankedArm(arm, rank, _status(state, arm, versus), versus,
                                tuple(a for a in state.arms if a in better[arm]),
                                len(state.values[arm]), how.get(arm)))  # fmt: skip
    ranked.sort(key=lambda r: (r.rank, -(r.versus_leader.estimate if r.versus_leader else 0.0)))
    claims = state.outcome in (TuneOutcome.BEST, TuneOutcome.WITHIN_MARGIN)
    visits = sum(len(v) for v in state.values.values())
    cost = TuneCost(state.blocks, visits, len(state.arms) * state.rule.max_rounds)
    return TuneResult(state.outcome, leader if claims else None, leader, tuple(ranked),
                      state.eliminations, cost, state.rule)  # fmt: skip
