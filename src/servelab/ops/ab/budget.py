"""A tune's time against ``--max-minutes``, said before it is spent.

The budget is checked between blocks (``ops/ab/tune.py`` stops before a block that would outrun
it), so a first block of many arms runs whole whatever the budget: a 20-arm tune with
``--max-minutes 0.5`` ran 79 s and said nothing. Before the first visit, a tune with a budget is
priced from the visits the ledger recorded (the latest tune's mean visit); with none recorded,
from its own first visit, before the rest of the first block. When even the first block would
outrun the budget, :class:`~servelab.core.ab.tuneevents.TuneOverBudget` says so with the
estimate.
"""

from __future__ import annotations

from collections.abc import Sequence

from servelab.core.ab.result import ArmVisit
from servelab.core.ab.tuneevents import PricedFrom, TuneOverBudget
from servelab.io.ledger.tunes import TuneStore

__all__ = ["mean_visit_s", "over_budget", "recorded_visit_s"]


def mean_visit_s(visits: Sequence[ArmVisit]) -> float | None:
    """The mean seconds of ``visits`` (None: none)."""
    return sum(v.cost.seconds for v in visits) / len(visits) if visits else None


def recorded_visit_s(store: TuneStore) -> float | None:
    """The mean visit of the latest recorded tune with visits (None: none recorded)."""
    for stored in reversed(store.list()):
        found = store.get(stored.tune_id)
        price = None if found is None else mean_visit_s(found.visits)
        if price is not None:
            return price
    return None


def over_budget(
    arms: int, max_rounds: int, visit_s: float, max_minutes: float, priced_from: PricedFrom
) -> TuneOverBudget | None:
    """The warning when ``arms`` visits of ``visit_s`` outrun ``max_minutes`` (None: they fit)."""
    first = arms * visit_s / 60.0
    if first <= max_minutes:
        return None
    return TuneOverBudget(arms, visit_s, priced_from, first, first * max_rounds, max_minutes)
