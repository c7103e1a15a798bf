"""A suspect change tested for a slowdown by the A/B rule (pure): its record and its verdict.

A knob suspected of making the deployment slower is tested by an A/B
(:mod:`servelab.core.ab.compare`): arm ``baseline`` the suspected value (the change), arm
``candidate`` its value at the last good point (the revert), each visit co-restarted and proven
live, in counterbalanced rounds; per concurrency the paired ratio ``candidate / baseline`` with
its t interval (the A/B's primary analysis). The verdict (:func:`judge_slow`):

- **convicted** when reverting is ``better`` at some concurrency (the interval above 1): the
  revert restores throughput;
- **exonerated** when at every concurrency the interval's upper end is below ``restore``, the
  ratio that would bring back what the slowdown cost (``1 / ratio_lost``): reverting it cannot
  restore the throughput lost;
- else **inconclusive** (too few rounds, an interval too wide).

The case event ``ab_test`` stores it (:class:`AbTestRecord`, through the codec), named by a case
evidence row of the same kind, so ``case resolve`` reads it as it reads a ``case test``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from servelab.core.ab.compare import Comparison, Verdict
from servelab.core.case.experiment import CONVICTED, EXONERATED, INCONCLUSIVE

__all__ = ["AbTestPoint", "AbTestRecord", "judge_slow"]


@dataclass(frozen=True)
class AbTestPoint:
    """One concurrency of the A/B: the revert's throughput over the change's (``ratio``), its
    interval and the A/B's verdict there."""

    concurrency: int
    ratio: float
    low: float
    high: float
    verdict: str


@dataclass(frozen=True)
class AbTestRecord:
    """``target`` tested by A/B ``ab_id``: ``suspect_value`` against ``revert_value``; the
    verdict ``outcome``; ``restore`` the ratio that would bring back what was lost."""

    KIND: ClassVar[str] = "ab_test"

    case_id: int = 0
    target: str = ""
    suspect_value: str | None = None
    revert_value: str | None = None
    ab_id: int | None = None
    restore: float = 1.0
    points: tuple[AbTestPoint, ...] = ()
    outcome: str = INCONCLUSIVE


def _point(c: Comparison) -> AbTestPoint:
    return AbTestPoint(c.concurrency, c.ratio, c.ci[0], c.ci[1], str(c.verdict))


def judge_slow(
    comparisons: Sequence[Comparison], restore: float
) -> tuple[str, tuple[AbTestPoint, ...]]:
    """The verdict on a change from its A/B's comparisons (revert over change), see the module
    docstring; ``restore``: the ratio that brings back the throughput lost."""
    points = tuple(_point(c) for c in comparisons)
    if any(c.verdict is Verdict.BETTER for c in comparisons):
        return CONVICTED, points
    bounded = [c for c in comparisons if c.verdict is not Verdict.INCONCLUSIVE]
    if bounded and len(bounded) == len(comparisons) and all(c.ci[1] < restore for c in bounded):
        return EXONERATED, points
    return INCONCLUSIVE, points
