"""Service-level objectives (pure): what ``--slo ttft_p99=2s,itl_p99=60ms,e2e_p99=10s`` says.

An SLO is one or more objectives; an objective is a metric, a percentile and a limit:
``ttft_p99=2s`` holds for a run when at least 99% of its TTFTs are within 2 s (the run's 99th
percentile is then within the limit too). The metrics are the ones ``bench`` reports
(:mod:`servelab.core.load.metrics`): ``ttft`` and ``e2e`` per request, ``tpot`` per request of
two or more output tokens, ``itl`` per gap between two content events. Any percentile from 0 to
100 (excluded) is allowed (``p50``, ``p90``, ``p99.9``); a limit is a duration with its unit
(``60ms``, ``2s``, ``1.5min``) from 1 µs to 24 h.

Whether a run met an SLO, and its goodput, is :func:`servelab.core.load.metrics.slo_attainment`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from servelab.core.whole import echoed

__all__ = [
    "LIMIT_MAX_MS",
    "LIMIT_MIN_MS",
    "SLO",
    "SLO_FORM",
    "Objective",
    "SloMetric",
    "exact",
    "parse_duration_ms",
    "parse_slo",
]

#: The form ``--slo`` takes.
SLO_FORM = "METRIC_pP=LIMIT[,...] (METRIC: ttft, itl, tpot, e2e; LIMIT: 60ms, 2s, 1.5min)"

#: The limits an objective may name: a microsecond (below it no clock here measures) to a day.
LIMIT_MIN_MS = 1e-3
LIMIT_MAX_MS = 24 * 3600e3
#: ``µs`` (the micro sign) and ``μs`` (the Greek mu) are ``us``, as the limits are worded
_UNITS_MS = {
    "us": 1e-3,
    "\u00b5s": 1e-3,
    "\u03bcs": 1e-3,
    "ms": 1.0,
    "s": 1e3,
    "min": 60e3,
}
_DURATION = re.compile(
    r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(us|\u00b5s|\u03bcs|ms|s|min)\s*"
)
_OBJECTIVE = re.compile(r"\s*([a-z0-9]+)_p([0-9]*\.?[0-9]+)\s*=(.*)")


class SloMetric(StrEnum):
    """What an objective limits (stored: values unchanged)."""

    TTFT = "ttft"
    ITL = "itl"
    TPOT = "tpot"
    E2E = "e2e"


@dataclass(frozen=True, slots=True)
class Objective:
    """``metric``'s ``percentile``-th percentile within ``limit_ms``: at least ``percentile``%
    of the run's values are within the limit."""

    metric: SloMetric
    percentile: float
    limit_ms: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "metric", SloMetric(self.metric))
        if not 0.0 < self.percentile < 100.0:
            raise ValueError(f"a percentile is above 0 and below 100, got {self.percentile}")
        if not (math.isfinite(self.limit_ms) and self.limit_ms > 0):
            raise ValueError(f"a limit is a positive duration, got {self.limit_ms} ms")
        if not LIMIT_MIN_MS <= self.limit_ms <= LIMIT_MAX_MS:
            raise ValueError(
                f"a limit is from 1us to 24h (no clock measures less, no request waits more),"
                f" got {self.limit_ms:.3g} ms"
            )

    @property
    def share(self) -> float:
        """The share of values that must be within the limit (0.99 for p99)."""
        return self.percentile / 100.0

    @property
    def text(self) -> str:
        """The objective as ``--slo`` takes it, every digit kept (``ttft_p99.99999=2000ms``):
        parsed again it is the same objective."""
        return f"{self.metric}_p{exact(self.percentile)}={exact(self.limit_ms)}ms"


@dataclass(frozen=True, slots=True)
class SLO:
    """The objectives a run is judged by (every one must hold); one per metric and percentile."""

    objectives: tuple[Objective, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "objectives", tuple(self.objectives))
        keys = [(o.metric, o.percentile) for o in self.objectives]
        if len(set(keys)) != len(keys):
            raise ValueError("an SLO names each metric and percentile once")

    @property
    def text(self) -> str:
        """The SLO as ``--slo`` takes it."""
        return ",".join(o.text for o in self.objectives)


def exact(value: float) -> str:
    """A finite number in positional notation with every digit it needs to be read back the
    same (``99.99999``, ``0.00001``, ``2000``): ``:g`` keeps six digits, and showed p99.99999 as
    p100, a percentile the parser refuses."""
    text = format(Decimal(repr(float(value))), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def parse_duration_ms(text: str) -> float:
    """``60ms`` → 60.0, ``2s`` → 2000.0, ``1.5min``, ``500us`` (or ``500µs``): a finite duration
    ≥ 0 with its unit, in milliseconds (ValueError otherwise)."""
    found = _DURATION.fullmatch(text)
    if found is None:
        raise ValueError(f"expected a duration with its unit (60ms, 2s, 1.5min), got {text!r}")
    value = float(found.group(1)) * _UNITS_MS[found.group(2)]
    if not math.isfinite(value):
        raise ValueError(f"expected a finite duration, got {text!r}")
    return value


def parse_slo(text: str) -> SLO:
    """``ttft_p99=2s,itl_p99=60ms`` → an :class:`SLO` (ValueError saying what is wrong)."""
    objectives = []
    for part in (p for p in text.split(",") if p.strip()):
        found = _OBJECTIVE.fullmatch(part)
        if found is None:
            raise ValueError(f"expected {SLO_FORM}, got {part.strip()!r}")
        name, pct, limit = found.groups()
        try:
            metric = SloMetric(name)
        except ValueError:
            known = ", ".join(SloMetric)
            raise ValueError(f"unknown SLO metric {name!r}: one of {known}") from None
        percentile = float(pct)  # the typed text is what a refusal quotes, never its rounding
        if not 0.0 < percentile < 100.0:  # p99.9999999999999999 is 100.0 as a float
            raise ValueError(f"a percentile is above 0 and below 100, got {echoed('p' + pct)}")
        objectives.append(Objective(metric, percentile, parse_duration_ms(limit)))
    if not objectives:
        raise ValueError(f"expected {SLO_FORM}, got {text!r}")
    return SLO(tuple(objectives))
