"""The words of a run against its SLO and of what the prefix caches served, shared by every
renderer that shows them (bench's table, markdown and pages, the capacity search, soak, ab).
Pure: returns str.
"""

from __future__ import annotations

import math

from servelab.core.load.cache import CacheSummary
from servelab.core.load.metrics import SLO_CONFIDENCE, ObjectiveResult, SloAttainment
from servelab.core.load.slo import exact

__all__ = ["attainment_text", "cache_text", "objective_text", "slo_rows", "verdict_word"]


def _pct(share: float) -> str:
    return "–" if math.isnan(share) else f"{share * 100:.1f}%"


def verdict_word(met: bool, sure: bool) -> str:
    """``met`` / ``missed``, and ``(unsure)`` when the interval straddles the share."""
    return ("met" if met else "missed") + ("" if sure else " (unsure)")


def objective_text(o: ObjectiveResult) -> str:
    """``p99 1,234.5 ms: met (99.4% within, 95% CI 98.8–99.7%, n=500)``."""
    obj = o.objective
    if o.n == 0:
        return f"p{exact(obj.percentile)} –: no value to judge"
    value = "–" if math.isnan(o.value_ms) else f"{o.value_ms:,.1f} ms"
    ci = f"{SLO_CONFIDENCE:.0%} CI {_pct(o.low)}–{_pct(o.high)}"
    verdict = verdict_word(o.met, o.sure)
    return (f"p{exact(obj.percentile)} {value}: {verdict} ({_pct(o.attainment)} within, {ci}, "
            f"n={o.n})")  # fmt: skip


def attainment_text(att: SloAttainment) -> str:
    """``97.3% of 200 requests met every objective: SLO met``."""
    return (f"{_pct(att.attainment)} of {att.requests} requests met every objective: SLO "
            f"{verdict_word(att.met, att.sure)}")  # fmt: skip


def slo_rows(att: SloAttainment) -> list[tuple[str, str]]:
    """One row per objective (``SLO ttft ≤ 2,000 ms``), then the attainment's."""
    rows = [(f"SLO {o.objective.metric} ≤ {o.objective.limit_ms:,g} ms", objective_text(o))
            for o in att.objectives]  # fmt: skip
    return [*rows, ("SLO attainment", attainment_text(att))]


def cache_text(cache: CacheSummary) -> str:
    """``82.4% (41,200 of 50,000 prompt tokens cached, 48 of 50 requests reported)``, or why it
    is unknown."""
    hit = cache.hit_rate
    if hit is None:
        return "unknown (no request reported cached tokens: the engine's cache report is off)"
    return (f"{hit * 100:.1f}% ({cache.cached_tokens:,} of {cache.prompt_tokens:,} prompt "
            f"tokens cached, {cache.reported} of {cache.requests} requests reported)")  # fmt: skip
