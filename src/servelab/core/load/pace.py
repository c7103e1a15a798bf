"""Whether an open loop's completions kept pace with its arrivals (pure: records in, a rate out).

A probe at ``rate`` req/s whose deployment serves less builds a queue: every request waits longer
than the one before it. Its latencies rise, but within a short probe they may still meet a loose
SLO (a p99 TTFT of 60 s), and its throughput is what the deployment served, not the rate
offered. So the rate a probe *served* is measured apart from its latencies.

**Two measures; the lower is the rate served** (never above ``rate``):

- *By completions* (:func:`_by_completions`): the answered requests in the order they arrived;
  the median arrival and the median completion of the first and of the last quarter; the
  requests between arrived over ``Δarrival`` and completed over ``Δcompletion``: ``rate ×
  Δarrival / Δcompletion``. Each request's latency is in both its arrival and its completion,
  so a keeping-pace probe's drain (long requests still decoding after the last arrival) is not
  counted against it (a 10 s probe of 5 s requests is served whole, where "requests over the
  run's duration" read 67%); a queue served first come first served adds its growth to
  Δcompletion. Arrivals' own randomness (Poisson) is in both and cancels.
- *By work* (:func:`_by_work`): an engine that slows every admitted request together (a batch)
  defeats the first: its early requests, slowed, end nearly with the late ones, and completions
  bunched read "served 325 req/s" of 300 offered where 147 were served. Tokens are work, and
  work is not compressed: the output tokens that arrived on the client (a stream's events;
  without them, spread evenly from the first byte, else the send, to the end) within the window
  from the first arrival plus the first quarter's median latency (at most half the span: the
  deployment is filling) to the last arrival, over the tokens of the requests that arrived in
  that window shifted back by the same start-up (what a deployment keeping pace answers in it):
  the share of ``rate`` served. Its noise over Poisson arrivals is about twice the first's
  (0.6 over the square root of the requests offered to the window), so it is raised by twice
  that before it is compared: it binds where it says clearly less.

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
#: The work measure's allowance for its noise: twice its spread over Poisson arrivals of a
#: deployment keeping pace (about 0.6 / sqrt(requests offered to the window), measured on
#: simulated probes of 16 to 1,000 requests): a short probe's work says "not sustained" only
#: when it is clearly short.
_WORK_NOISE = 1.2


def served_rate(rate: float, records: Sequence[RequestRecord]) -> float | None:
    """The rate (req/s) at which ``records``' answered, measured requests were served, offered at
    ``rate``: the lower of :func:`_by_completions` and :func:`_by_work` (with its noise allowed),
    never above ``rate`` (None: fewer than :data:`MIN_PACED` answered, their arrivals all at once,
    or no finite rate)."""
    answered = sorted(
        (r for r in records if r.ok and not r.warmup and r.end_ns is not None),
        key=lambda r: (r.scheduled_ns, r.index),
    )
    if len(answered) < MIN_PACED or not (math.isfinite(rate) and rate > 0):
        return None
    found = [
        x for x in (_by_completions(rate, answered), _by_work(rate, answered)) if x is not None
    ]
    return min(rate, *found) if found else None


def _by_completions(rate: float, answered: Sequence[RequestRecord]) -> float | None:
    """``rate × Δarrival / Δcompletion`` between the medians of the first and the last quarter
    (None: arrivals or completions all at once, or the later ones answered first)."""
    quarter = len(answered) // 4
    early, late = answered[:quarter], answered[-quarter:]
    arrivals = statistics.median(r.scheduled_ns for r in late) - statistics.median(
        r.scheduled_ns for r in early
    )
    completions = statistics.median(r.end_ns or 0 for r in late) - statistics.median(
        r.end_ns or 0 for r in early
    )
    if arrivals <= 0 or completions <= 0:
        return None
    return rate * arrivals / completions


def _by_work(rate: float, answered: Sequence[RequestRecord]) -> float | None:
    """``rate ×`` the tokens that arrived in the window over those offered to it, raised by its
    noise (:data:`_WORK_NOISE` over the square root of the requests offered to it), so that it
    binds only where it says clearly less (None: no window, or nothing offered to it)."""
    first, last = answered[0].scheduled_ns, answered[-1].scheduled_ns
    quarter = answered[: max(1, len(answered) // 4)]
    filling = statistics.median((r.end_ns or 0) - r.scheduled_ns for r in quarter)
    start = first + int(min(max(filling, 0), (last - first) // 2))
    shift = start - first
    done = offered = 0.0
    count = 0
    for r in answered[1:]:  # the first marks the span's start: counted, it was a whole deficit
        total, within = _tokens(r, start, last)
        done += within
        if r.scheduled_ns <= last - shift:
            offered += total
            count += 1
    if shift <= 0 or offered <= 0:
        return None
    return rate * done / offered * (1 + _WORK_NOISE / math.sqrt(count))


def _tokens(record: RequestRecord, start: int, stop: int) -> tuple[float, float]:
    """(the output tokens of ``record``, those of them that arrived in ``[start, stop]`` (ns)):
    its stream's events where it has them, else its output tokens spread evenly from its first
    byte (or its send) to its end."""
    if record.event_ns and len(record.event_ns) == len(record.event_tokens):
        pairs = zip(record.event_ns, record.event_tokens, strict=True)
        return sum(record.event_tokens), sum(n for t, n in pairs if start <= t <= stop)
    total, end = record.output_tokens, record.end_ns or 0
    begin = record.first_byte_ns or record.sent_ns or record.scheduled_ns
    if end <= begin:
        return total, (total if start <= end <= stop else 0)
    return total, total * max(min(end, stop) - max(begin, start), 0) / (end - begin)


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
