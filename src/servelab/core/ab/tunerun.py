"""A tune's record (pure): what ``servelab tune`` builds visit by visit, stores in the ledger's
``tune_runs`` row, prints with ``--json`` and renders.

**Arms.** The knobs (one or more, each a service's knob with the values to try) make a grid: every
combination of their values is an arm (:func:`grid`), named by its value (one knob) or by
``NAME=VALUE, ...`` (several).

**Levels.** The metric is measured at each concurrency of the tune (``throughput``: output tok/s,
the steady state's); every level is a tune of its own by the rule of :mod:`servelab.core.ab.tune`,
at ``alpha / L`` for ``L`` levels (Bonferroni over the levels too), so with probability at least
``1 − alpha`` every statement of every level holds. A visit measures an arm at the levels where it
is still in the running; a block visits every arm still in the running at some level, in the
seeded Williams order of those arms (:func:`~servelab.core.ab.tune.visit_order`), its cycle begun
again whenever that set changes. With one level this is exactly the rule's own
:func:`~servelab.core.ab.tune.block_order`.

**The state is the visits.** :func:`replay` runs the rule over the visits in block order, so a
tune read back from its journal (``tune --resume``) continues with the same next block, and the
record's per-level results are always those of its visits.

**Best.** The arm the levels agree on (:func:`agreed_best`): at every level the winner (a claim:
``best`` or ``within_margin``) or reported equivalent to it. Levels whose winners differ, or a
level that makes no claim, leave no best: ``--keep best`` then keeps nothing.

**Screening.** A tune with ``screening`` (``tune --screen``, :mod:`servelab.core.ab.screenrun`)
first visits the screening design's runs; :func:`screen` replays that phase from its visits and,
once it stops, :func:`follow_up_arms` are the tune's arms (none: nothing to tune). Its visits are
kept apart from the tune's (``screening.visits``); in the ledger both are one journal, the
screening's first (:func:`with_visits` splits it again).

**Cost.** Every visit is an arm's co-restart and its runs: the minutes the visits spent, the
screening's too (GPU-minutes at ``gpus``), against the full design, every arm of the full grid in
every one of ``max_rounds`` blocks, priced at the visits measured
(:func:`servelab.core.ab.design.fixed_design`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, assert_never

from servelab.core.ab.design import DesignCost, fixed_design, spent
from servelab.core.ab.factorial import estimate_effects
from servelab.core.ab.result import AbMetric, ArmVisit
from servelab.core.ab.screenrun import LevelEffects, Screening, merged_follow_up, screen_stopped
from servelab.core.ab.tune import (
    ArmStatus,
    TuneResult,
    TuneRule,
    TuneState,
    record_block,
    start_tune,
    tune_result,
    visit_order,
)
from servelab.core.answers.contract import AnswersUnchecked
from servelab.core.answers.judge import AnswersJudgement
from servelab.core.ledger.codec import OMITTED_IF_NONE

__all__ = [
    "MAX_ARMS",
    "LevelTune",
    "NextBlock",
    "TuneArm",
    "TuneKnob",
    "TuneMetric",
    "TuneRecord",
    "agreed_best",
    "arm_count",
    "conclude_tune",
    "follow_up_arms",
    "grid",
    "level_rule",
    "next_block",
    "objective_value",
    "replay",
    "screen",
    "with_visits",
]


#: The most arms a tune takes: 2^8, the full grid of the most knobs a screening takes (eight, at
#: two values each). Every arm is a co-restart in every block, and ``tune --plan`` simulates the
#: rule over all of them (about two minutes at 256 arms on a loaded two-core machine).
MAX_ARMS = 256

#: What a tune maximizes at each level: an A/B's metrics (stored: values unchanged). Each visit
#: keeps its values under ``throughput`` whatever the metric, as an A/B's visit does.
TuneMetric = AbMetric


@dataclass(frozen=True)
class TuneKnob:
    """One knob of a tune: ``service``'s ``knob`` and the ``values`` it tries."""

    service: str
    knob: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class TuneArm:
    """One combination of values: its label and each knob's value, in the knobs' order."""

    label: str
    values: tuple[str, ...]


def arm_count(value_counts: Iterable[int]) -> int:
    """The arms of a grid whose knobs take these many values each: their product, counted before
    any arm is built (:data:`MAX_ARMS` is checked on it)."""
    return math.prod(value_counts)


def grid(knobs: Sequence[TuneKnob]) -> tuple[TuneArm, ...]:
    """Every combination of the knobs' values, the first knob's values slowest."""
    combos = itertools.product(*(k.values for k in knobs))
    if len(knobs) == 1:
        return tuple(TuneArm(c[0], c) for c in combos)
    return tuple(TuneArm(", ".join(f"{k.knob}={v}" for k, v in zip(knobs, c, strict=True)), c)
                 for c in combos)  # fmt: skip


def objective_value(metric: TuneMetric, visit: ArmVisit, level: int) -> float | None:
    """The value ``metric`` takes in ``visit`` at concurrency ``level`` (None: not measured, or
    not positive). The one place a metric is read: another metric is another case here."""
    match metric:
        case AbMetric.THROUGHPUT | AbMetric.GOODPUT | AbMetric.CAPACITY:
            value = visit.throughput.get(level)  # the visit's value of its metric
        case _:
            assert_never(metric)
    return value if value is not None and value > 0 else None


def level_rule(rule: TuneRule, levels: int) -> TuneRule:
    """The rule each of ``levels`` levels runs: ``alpha`` split over them."""
    return replace(rule, alpha=rule.alpha / max(1, levels))


@dataclass(frozen=True)
class LevelTune:
    """One level's tune: its state (the values of each block) and what it supports."""

    level: int
    state: TuneState
    result: TuneResult


@dataclass(frozen=True)
class NextBlock:
    """The block to run (1-based): the arms in visit order, and the levels each measures."""

    block: int
    order: tuple[str, ...]
    levels: Mapping[str, tuple[int, ...]]


def _block_values(
    metric: TuneMetric, state: TuneState, level: int, visits: Mapping[str, ArmVisit]
) -> dict[str, float]:
    values = {a: objective_value(metric, visits[a], level) for a in state.survivors}
    missing = sorted(a for a, v in values.items() if v is None)
    if missing:
        raise ValueError(f"no {metric} at C{level} for {', '.join(missing)}")
    return {a: v for a, v in values.items() if v is not None}


def replay(
    arms: Sequence[str],
    rule: TuneRule,
    levels: Sequence[int],
    metric: TuneMetric,
    visits: Sequence[ArmVisit],
) -> tuple[dict[int, TuneState], NextBlock | None]:
    """Each level's state after the complete blocks of ``visits`` (``round``: the block, 0-based),
    and the block to run next (None: every level has stopped, or fewer than two arms are left:
    nothing to compare)."""
    if len(arms) < 2:
        return {}, None  # a screening left nothing to tune, or answers dropped every rival
    per_level = level_rule(rule, len(levels))
    states = {lvl: start_tune(arms, per_level) for lvl in levels}
    previous: tuple[str, ...] | None = None
    cycle_start, block = 0, 1
    while running := [lvl for lvl in levels if not states[lvl].done]:
        active = tuple(a for a in arms if any(a in states[lvl].survivors for lvl in running))
        if previous is not None and active != previous:
            cycle_start = block - 1
        order = visit_order(active, block, scheme=rule.order, seed=rule.seed,
                            cycle_start=cycle_start)  # fmt: skip
        done = {v.arm: v for v in visits if v.round == block - 1}
        if any(a not in done for a in order):
            need = {a: tuple(lvl for lvl in running if a in states[lvl].survivors) for a in order}
            return states, NextBlock(block, order, need)
        for lvl in running:
            states[lvl] = record_block(states[lvl], _block_values(metric, states[lvl], lvl, done))
        previous, block = active, block + 1
    return states, None


def agreed_best(tunes: Sequence[LevelTune]) -> str | None:
    """The arm that is, at every level, the winner or equivalent to it (the first such arm that
    wins a level; None when a level makes no claim or no arm qualifies at every level)."""
    if not tunes or any(t.result.winner is None for t in tunes):
        return None
    fits = [{r.arm for r in t.result.ranking if r.arm == t.result.winner
             or r.status is ArmStatus.EQUIVALENT} for t in tunes]  # fmt: skip
    common = set.intersection(*fits)
    winners = [t.result.winner for t in tunes if t.result.winner in common]
    arms = [a for a in tunes[0].state.arms if a in common]
    return winners[0] if winners else (arms[0] if arms else None)


@dataclass(frozen=True)
class TuneRecord:
    """A tune: its knobs and arms, the metric and levels, the rule (``alpha`` family-wise over
    every level), the visits in the order they ran; then what they support: each level's tune,
    the arm the levels agree on (``best``), the cost against the full design, whether
    ``max_minutes`` ended it, and how the deployment was left (``kept``: the arm left live, else
    ``original`` restored). ``slo``: the SLO goodput and capacity are judged by (``--slo``'s
    text; None: none, left out of the record). ``screening``: the phase before the tune
    (``--screen``; None: none, left out of the record); its arms are then the follow-up's."""

    knobs: tuple[TuneKnob, ...]
    arms: tuple[TuneArm, ...]
    metric: TuneMetric
    levels: tuple[int, ...]
    rule: TuneRule
    gpus: int = 1
    max_minutes: float | None = None
    original: tuple[str | None, ...] = ()
    visits: tuple[ArmVisit, ...] = ()
    tunes: tuple[LevelTune, ...] = ()
    best: str | None = None
    time_budget_hit: bool = False
    kept: str | None = None
    restored: bool = False
    cost: DesignCost | None = None
    full_cost: DesignCost | None = None
    tune_id: int | None = None
    resumed: bool = False
    slo: Annotated[str | None, OMITTED_IF_NONE] = None
    screening: Annotated[Screening | None, OMITTED_IF_NONE] = None
    #: each arm's answers judged against the answers' baseline arm, and the arms dropped because
    #: they change answers (``--answers gate``; None: answers not checked)
    answers: Annotated[tuple[AnswersJudgement, ...] | None, OMITTED_IF_NONE] = None
    dropped: Annotated[tuple[str, ...] | None, OMITTED_IF_NONE] = None
    #: why answers asked for were not checked (a trace, a capacity search, runs too short for a
    #: probe; None: checked, or not asked for): the best and the kept arm are then on speed alone
    answers_unchecked: Annotated[AnswersUnchecked | None, OMITTED_IF_NONE] = None

    @property
    def labels(self) -> tuple[str, ...]:
        """The arms in the running: every arm but those dropped for changing answers (the
        rule replays without them, so none of them is ever the best)."""
        gone = set(self.dropped or ())
        return tuple(a.label for a in self.arms if a.label not in gone)

    def arm(self, label: str) -> TuneArm:
        return next(a for a in self.arms if a.label == label)

    @property
    def best_unshown(self) -> bool:
        """True when the best arm's answers a gate could not show unchanged (too few probe
        pairs): it is best on speed alone and ``--keep best`` does not keep it."""
        judged = [j for j in self.answers or () if j.candidate.arm == self.best]
        return any(j.unshown for j in judged)

    @property
    def blocks(self) -> int:
        """Blocks begun (the last may be incomplete)."""
        return max((v.round + 1 for v in self.visits), default=0)

    @property
    def all_visits(self) -> tuple[ArmVisit, ...]:
        """Every visit in the order it ran: the screening's, then the tune's."""
        first = () if self.screening is None else self.screening.visits
        return (*first, *self.visits)


def next_block(record: TuneRecord) -> NextBlock | None:
    """The block ``record``'s visits leave to run (None: every level has stopped)."""
    return replay(record.labels, record.rule, record.levels, record.metric, record.visits)[1]


def conclude_tune(record: TuneRecord) -> TuneRecord:
    """``record`` with everything its visits support worked out: each level's tune, the agreed
    best arm, and the cost of the visits against the full design."""
    states, _ = replay(record.labels, record.rule, record.levels, record.metric, record.visits)
    tunes = tuple(LevelTune(lvl, s, tune_result(s)) for lvl, s in states.items())
    costs = [v.cost for v in record.all_visits]
    screened = 0 if record.screening is None else record.screening.blocks
    cost = spent(costs, screened + record.blocks, record.gpus)
    full = fixed_design(costs, record.rule.max_rounds, record.levels, record.gpus,
                        arms=len(grid(record.knobs)))  # fmt: skip
    return replace(record, tunes=tunes, best=agreed_best(tunes), cost=cost, full_cost=full)


# -- the screening phase ------------------------------------------------------------------------


def screen(
    screening: Screening, rule: TuneRule, levels: Sequence[int], metric: TuneMetric
) -> tuple[Screening, NextBlock | None]:
    """``screening`` with each level's estimates after the complete blocks of its visits (and
    its follow-up once it stopped), and the block to run next (None: the phase is over)."""
    design, labels = screening.design, screening.labels
    per_level = level_rule(rule, len(levels))
    blocks: list[dict[str, ArmVisit]] = []
    while True:
        done = {v.arm: v for v in screening.visits if v.round == len(blocks)}
        order = visit_order(labels, len(blocks) + 1, scheme=rule.order, seed=rule.seed)
        if any(a not in done for a in order):
            return screening, NextBlock(len(blocks) + 1, order, dict.fromkeys(order, tuple(levels)))
        blocks.append(done)
        # each level's values, per block in run order (a missing one is refused as not positive)
        values = {lvl: [[objective_value(metric, b[a], lvl) or 0.0 for a in labels]
                        for b in blocks] for lvl in levels}  # fmt: skip
        effects = tuple(LevelEffects(lvl, estimate_effects(design, values[lvl], per_level))
                        for lvl in levels)  # fmt: skip
        screening = replace(screening, levels=effects)
        if screen_stopped(effects, len(blocks), rule):
            return replace(screening, follow_up=merged_follow_up(design, effects)), None


def follow_up_arms(knobs: Sequence[TuneKnob], screening: Screening) -> tuple[TuneArm, ...]:
    """The tune after the screening: the grid of the knobs it could not rule out, each arm's
    values with every other knob at its low value (none: nothing left to tune)."""
    follow = screening.follow_up
    if follow is None or not follow.factors:
        return ()
    low = {f.name: f.low for f in screening.design.factors}
    chosen = [k for k in knobs if k.knob in follow.factors]
    arms = []
    for arm in grid(chosen):
        values = dict(zip((k.knob for k in chosen), arm.values, strict=True))
        arms.append(TuneArm(arm.label, tuple(values.get(k.knob, low[k.knob]) for k in knobs)))
    return tuple(arms)


def with_visits(record: TuneRecord, visits: Sequence[ArmVisit]) -> TuneRecord:
    """``record`` (before its first visit) with ``visits``, a journal read back in order: a
    screening's are the first blocks of its runs up to where it stopped, the rest the tune's."""
    if record.screening is None:
        return replace(record, visits=tuple(visits))
    first, runs = record.screening, len(record.screening.design.runs)
    for blocks in range(1, len(visits) // runs + 1):
        head = replace(first, visits=tuple(visits[: blocks * runs]))
        screening, block = screen(head, record.rule, record.levels, record.metric)
        if block is None:  # stopped after this block: the rest is the tune's
            return replace(record, screening=screening,
                           arms=follow_up_arms(record.knobs, screening),
                           visits=tuple(visits[blocks * runs :]))  # fmt: skip
    whole = replace(first, visits=tuple(visits))  # still screening: every visit its own
    return replace(record, screening=screen(whole, record.rule, record.levels, record.metric)[0])
