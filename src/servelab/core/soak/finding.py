"""A finding of a soak's localization, and one dropped as explained by a stronger one (pure;
the per-layer rules of :mod:`servelab.core.soak.layerrules` and :mod:`servelab.core.soak.diagnose`
make them, the soak's result stores them, ``report.soak.words`` words them).

A finding names a suspected layer, its confidence, the observations (ids) that support it and
those that contradict it, and the worker when one is singled out. Confidence (a score in [0, 1],
not a probability): each rule has a base; every supporting observation beyond the ones its gate
needs adds :data:`SUPPORT_STEP`, every contradicting one removes :data:`CONTRA_STEP`; the result
is clipped to [0.05, 0.99] (:func:`finding`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from servelab.core.telemetry.layers import Layer

__all__ = ["CONTRA_STEP", "SUPPORT_STEP", "DropReason", "Dropped", "Finding", "finding"]

SUPPORT_STEP = 0.05
CONTRA_STEP = 0.2


@dataclass(frozen=True, slots=True)
class Finding:
    """A suspected layer with its confidence, the observations (ids) for and against it, and
    the worker (service name or URL) when one is singled out."""

    layer: Layer
    confidence: float
    supporting: tuple[str, ...]
    contradicting: tuple[str, ...]
    worker: str | None = None


class DropReason(StrEnum):
    """Why a finding was dropped: a stronger one, on a hop further out, explains its
    observations."""

    INNER_HOP_WORKED = "inner_hop_worked"  # the same payload worked at the hops inside
    ANSWERED_IN_FRONT = "answered_in_front"  # the failed answers came from in front of the router


@dataclass(frozen=True, slots=True)
class Dropped:
    """A finding left out: its layer, worker and confidence, the finding that explains it
    (``by``), why, and the observations (ids) that show it."""

    layer: Layer
    confidence: float
    by: Layer
    reason: DropReason
    because: tuple[str, ...]
    worker: str | None = None


def finding(
    layer: Layer, base: float, gate: list[str], extra: list[str], contra: list[str]
) -> Finding:
    """A finding of ``layer`` from its rule's ``base``, the observations its gate needs
    (``gate``), those beyond them (``extra``) and those against it (``contra``), scored as the
    module says."""
    support = list(dict.fromkeys([*gate, *extra]))
    against = list(dict.fromkeys(c for c in contra if c not in support))
    score = base + SUPPORT_STEP * len(extra) - CONTRA_STEP * len(against)
    return Finding(layer, round(min(0.99, max(0.05, score)), 2), tuple(support), tuple(against))
