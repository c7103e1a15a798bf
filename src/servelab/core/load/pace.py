"""Whether an open loop's completions kept pace with its arrivals (pure: records in, a rate out).

A probe at ``rate`` req/s whose deployment serves less builds a queue: every request waits longer
than the one before it. Its latencies rise, but within a short probe they may still meet a loose
SLO (a p99 TTFT of 60 s), and its throughput is what the deployment served, not the rate
offered. So the rate a probe *served* is measured apart from its latencies.

**The measure.** The answered requests in the order they arrived; the first quarter and the last
quarter of them; the median arrival and the median completion of each quarter. The requests
between the two quarters' medians arrived over ``Δarrival`` and completed over ``Δcompletion``:
the probe served ``rate × Δarrival / Δcompletion`` req/s.

- A probe that kept pace has the same latency early and late (Δcompletion ≈ Δarrival), however
  long its requests are: each request's latency is in both its arrival and its completion, so
  the drain after the last arrival (long requests still decoding) is not counted against it,
  as "completions within the arrivals' span" or "requests over the run's duration" would count
  it (a 10 s probe of 5 s requests would read as 67% served).
- A probe that did not keep pace has each request wait ``i × (1/served − 1/rate)`` longer than
  the first: Δcompletion grows by that queue, and the measure is the rate it was served at.
- Medians of whole quarters: a request or two unlike the others (a long answer, a slow first
  request) do not move it; arrivals' own randomness (Poisson) is in both Δs and cancels.

:data:`SUSTAINED_SHARE` of the rate served is sustained. The in-flight limit (an open loop's
``--concurrency``) binds when every slot was taken at once (:func:`in_flight_peak`): the
requests waited for one on the client, and the deployment behind it was not asked for more.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from servelab.core.load.records import RequestRecord

__all__ = ["MIN_PACED", "SUSTAINED_SHARE", "in_flight_peak", "served_rate", "sustained"]

#: A probe served at least this share of its rate sustained it (under: a queue grew).
SUSTAINED_SHARE = 0.9
#: Fewer answered requests than this measure no pace (two quarters of two requests each).
MIN_PACED = 8


def served_rate(rate: float, records: Sequence[RequestRecord]) -> float | None:
    """The rate (req/s) at which ``records``' answered, measured requests were served, offered at
    ``rate`` (None: fewer than :data:`MIN_PACED` answered, their arrivals (or completions) all at
    once, or no finite rate)."""
    answered = sorted(
        (r for r in records if r.ok and not r.warmup and r.end_ns is not None),
        key=lambda r: (r.scheduled_ns, r.index),
    )
    if len(answered) < MIN_PACED or not (math.isfinite(rate) and rate > 0):
        return None
    quarter = len(answered) // 4
    early, late = answered[:quarter], answered[-quarter:]
    arrivals = statistics.median(r.scheduled_ns for r in late) - statistics.median(
        r.scheduled_ns for r in early
    )
    completions = statistics.median(r.end_ns or 0 for r in late) - statistics.median(
        r.end_ns or 0 for r in early
    )
    if arrivals <= 0 or completions <= 0:
        return None  # all at once, or the later ones answered first: no pace to tell
    return rate * arrivals / completions


def sustained(rate: float, served: float | None) -> bool:
    """``served`` (None: not measured, no evidence against) is :data:`SUSTAINED_SHARE` of
    ``rate`` or more."""
    return served is None or served >= SUSTAINED_SHARE * rate


def in_flight_peak(records: Sequence[RequestRecord]) -> int:
    """The most measured requests in flight at once (sent, not yet ended)."""
    marks = sorted(
        [(r.sent_ns, 1) for r in records if not r.warmup and r.sent_ns]
        + [(r.end_ns, -1) for r in records if not r.warmup and r.sent_ns and r.end_ns is not None]
    )
    peak = in_flight = 0
    for _t, step in marks:
        in_flight += step
        peak = max(peak, in_flight)
    return peak
