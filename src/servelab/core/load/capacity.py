"""The largest load that meets an SLO, by a bounded search (pure: the probes' results in, the next
load to probe and the conclusion out).

The load is a closed loop's concurrency (whole numbers) or an open loop's arrival rate. The search:

1. **Ramp**: probe the first load, then double it while the SLO holds, up to the ceiling (the
   largest load allowed; none: the probe budget bounds it) and the limit (a closed loop's
   requests per probe: a concurrency above them never has more in flight, so it is not a higher
   load). If the first load already misses, halve it until one holds (a concurrency stops at 1).
   The SLO holding at the limit stops the search (:attr:`CapacityStop.LIMITED`: more requests
   per probe would search further).
2. **Saturation**: when a doubled load met the SLO but its throughput rose by less than
   :data:`SATURATION_GAIN` over the load before it, the deployment is saturated: more load only
   queues. The search stops there; the capacity is the load before (the SLO did not bind). Loads
   are compared as they ran (capped at the limit): a concurrency the requests could not fill is
   no evidence of saturation.

**A rate is sustained.** An open loop's probe at ``rate`` sends :func:`rate_requests`: at least
``rate`` times :data:`PROBE_SPAN_S` seconds of arrivals, so a queue the rate builds has the time
to show in the latencies (a fixed 100 requests at 256 req/s arrive as one 0.4 s burst, which a
deployment that cannot sustain 128 req/s absorbs: every probe "met" and the throughput, a
burst's, flattened into "saturated"). At most :data:`PROBE_REQUESTS` requests a probe (or the
requests asked, when more): the rate those sustain for the span is the search's limit, and the
SLO holding there stops it as :attr:`CapacityStop.LIMITED` (more requests would search higher),
never as saturated.
3. **Bisection** between the largest load that held and the smallest above it that missed, until
   they are within :data:`RESOLUTION` of each other (a concurrency: adjacent).

**A miss on the way down is probed again.** A load that missed before any load held (the first
probe, and the halving below it) ran on a deployment that may still have been paying its one-time
warm-up (a real engine's first requests are slow: CUDA graphs, caches): when such a load is the
upper end of the bracket, it is probed once more before anything is concluded from it, and the
search goes on from the later verdict (each load's latest probe counts).

**A rate is served.** A rate probe whose completions did not keep pace with its arrivals
(:func:`~servelab.core.load.pace.served_rate` under :data:`~servelab.core.load.pace.
SUSTAINED_SHARE` of the rate) is not met, whatever its latencies (:func:`rate_probe`): a queue grew
through it, and a loose SLO met within the span says nothing about the rate. A rate met within
the share is named by what it served when that is less (:attr:`Capacity.offered` keeps the
rate offered): the capacity, and a saturation (both its probes met), is never a rate above what
its probe served. The in-flight limit taken whole (``capped``) is kept to be said; an upper end
not sustained gives no estimate (its latencies are a queue's).

**Failed requests are no verdict.** A probe where more than :data:`FAILED_SHARE` of the requests
failed (an engine killed, a router with no worker) measured no latency of a working deployment:
the search stops there (:attr:`CapacityStop.FAILED`) and concludes no capacity at all.

At most :data:`PROBES` probes (a search whose loads all missed, down to the last probe, never
met the SLO). The conclusion names the bracket, how it stopped, an interpolated
estimate (where the binding objective, the one furthest over its limit, crosses its limit between
the bracket's ends, linearly) and how sure it is: each end's verdict is sure when its objectives'
95% intervals of the share within lie wholly on the side of that verdict
(:attr:`~servelab.core.load.metrics.ObjectiveResult.sure`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from servelab.core.load.pace import sustained

__all__ = [
    "FAILED_SHARE",
    "PROBES",
    "PROBE_REQUESTS",
    "PROBE_SPAN_S",
    "RESOLUTION",
    "SATURATION_GAIN",
    "Capacity",
    "CapacityStop",
    "LoadKind",
    "Probe",
    "conclude",
    "first_warmup",
    "next_load",
    "rate_limit",
    "rate_probe",
    "rate_requests",
]

#: The most probes one search runs.
PROBES = 12
#: Bisection stops when the bracket is this narrow, relative to its lower end.
RESOLUTION = 0.03
#: A probe with more than this share of its requests failed ends the search without a verdict.
FAILED_SHARE = 0.5
#: A doubled load whose throughput rose by less than this share means saturation.
SATURATION_GAIN = 0.05
#: The seconds of arrivals a rate probe sustains at the least: long against a request's own
#: latency (a queue growing at a rate the deployment cannot serve adds seconds of TTFT within
#: it), short enough that a 12-probe search stays within minutes.
PROBE_SPAN_S = 10.0
#: The most requests a rate probe sends unless more were asked (``--requests``): 3,000 sustain
#: 300 req/s for :data:`PROBE_SPAN_S`.
PROBE_REQUESTS = 3000


class LoadKind(StrEnum):
    """What the search varies (stored: values unchanged)."""

    CONCURRENCY = "concurrency"
    RATE = "rate"


class CapacityStop(StrEnum):
    """Why the search stopped (stored: values unchanged)."""

    BRACKETED = "bracketed"
    SATURATED = "saturated"
    CEILING = "ceiling"
    NEVER_MET = "never met"
    BUDGET = "budget"
    INTERRUPTED = "interrupted"
    #: the SLO held at the most load the requests per probe can exercise
    LIMITED = "limited"
    #: a probe's requests mostly failed: no verdict
    FAILED = "requests failed"


@dataclass(frozen=True, slots=True)
class Probe:
    """One run at one ``load``: whether the SLO held (``sure``: at 95%), the throughput (output
    tokens/s: the steady state's in a closed loop), the binding objective's value over its limit
    (``ratio``, above 1: missed; NaN: no value), its ledger row, and the share of its requests
    that failed (``failed``); a rate probe's rate ``served`` (req/s; None: not measured) and
    whether its in-flight limit was taken whole (``capped``); the share of its requests the
    run's end cut before they were answered (``cut``: ``--deadline``; they are not failures, and
    the probe is judged as far as they went: :mod:`servelab.core.load.metrics`)."""

    load: float
    met: bool
    sure: bool
    throughput: float
    ratio: float
    run_id: int | None = None
    failed: float = 0.0
    served: float | None = None
    capped: bool = False
    cut: float = 0.0

    @property
    def sustained(self) -> bool:
        """The probe served its load (a concurrency, or a rate not measured: no evidence
        against)."""
        return sustained(self.load, self.served)


@dataclass(frozen=True, slots=True)
class Capacity:
    """What the search found: ``capacity``, the largest load that met the SLO (None: none did);
    ``above``, the smallest load above it that missed (None: none); ``estimate``, where the
    binding objective crosses its limit between them (None: not bracketed by values); ``sure``,
    both ends' verdicts sure; every probe in the order run; and ``limit``, the most load a probe
    could exercise (a closed loop's requests per probe; None: no limit)."""

    kind: LoadKind
    stop: CapacityStop
    capacity: float | None
    above: float | None
    estimate: float | None
    sure: bool
    probes: tuple[Probe, ...]
    limit: float | None = None
    #: the rate offered at the lower end when it served less (``capacity`` is then the rate
    #: served, within :data:`~servelab.core.load.pace.SUSTAINED_SHARE`); None: as offered
    offered: float | None = None


def rate_probe(
    rate: float,
    *,
    met: bool,
    sure: bool,
    throughput: float,
    ratio: float,
    served: float | None,
    capped: bool = False,
    run_id: int | None = None,
    failed: float = 0.0,
    cut: float = 0.0,
) -> Probe:
    """A rate probe's verdict: the SLO's (``met``, ``sure``, ``ratio``), not met when it did not
    sustain ``rate`` (served under the share): then sure (the shortfall is the whole probe's, not
    a percentile's), and its ratio the SLO's only when the SLO missed too (no estimate crosses a
    limit it kept)."""
    probe = Probe(rate, met, sure, throughput, ratio, run_id, failed, served, capped, cut)
    if probe.sustained:
        return probe
    return Probe(rate, False, sure if not met else True, throughput, ratio if not met else math.nan,
                 run_id, failed, served, capped, cut)  # fmt: skip


def first_warmup(kind: LoadKind, start: float, requests: int) -> int:
    """The warm-up before a search's first probe when none was asked: one request per user of
    the first load (a rate: one second's arrivals), at least 1, at most the requests per probe."""
    per_round = start if kind == LoadKind.CONCURRENCY else math.ceil(start)
    return int(max(1, min(per_round, requests)))


def rate_requests(rate: float, requests: int, span_s: float = PROBE_SPAN_S) -> int:
    """The requests a probe at ``rate`` sends: ``requests``, or more to sustain ``span_s``
    seconds of arrivals, at most :data:`PROBE_REQUESTS` (or ``requests``, when more)."""
    if not (math.isfinite(rate) and rate > 0 and math.isfinite(span_s) and span_s > 0):
        return requests
    sustained = min(math.ceil(rate * span_s), max(requests, PROBE_REQUESTS))
    return max(requests, sustained)


def rate_limit(requests: int, span_s: float = PROBE_SPAN_S) -> float:
    """The highest rate a probe sustains for ``span_s`` seconds: the search's limit."""
    return max(requests, PROBE_REQUESTS) / span_s


def _latest(probes: Sequence[Probe]) -> list[Probe]:
    """Each load's latest probe (a load probed again counts by its later verdict)."""
    return list({p.load: p for p in probes}.values())


def _descent_miss(probes: Sequence[Probe], hi: Probe) -> bool:
    """``hi`` missed before any load held, and was probed once: it is probed again."""
    first_hold = next((i for i, p in enumerate(probes) if p.met), len(probes))
    runs = [i for i, p in enumerate(probes) if p.load == hi.load]
    return len(runs) == 1 and runs[0] < first_hold


def _bracket(probes: Sequence[Probe]) -> tuple[Probe | None, Probe | None]:
    """The largest load that held, and the smallest load above it that missed (each load by its
    latest probe)."""
    probes = _latest(probes)
    held = [p for p in probes if p.met]
    lo = max(held, key=lambda p: p.load, default=None)
    missed = [p for p in probes if not p.met and (lo is None or p.load > lo.load)]
    hi = min(missed, key=lambda p: p.load, default=None)
    return lo, hi


def _ran(load: float, limit: float | None) -> float:
    """The load a probe exercised: at most ``limit``."""
    return load if limit is None else min(load, limit)


def _saturated(probes: Sequence[Probe], limit: float | None = None) -> bool:
    """The last probe doubled (the ramp) a load that held, held too, and barely raised the
    throughput (loads as they ran: capped at ``limit``)."""
    if len(probes) < 2:
        return False
    last, before = probes[-1], probes[-2]
    doubled = _ran(last.load, limit) >= 1.9 * _ran(before.load, limit)
    grew = doubled and before.met and last.met
    return grew and last.throughput < before.throughput * (1 + SATURATION_GAIN)


def _narrow(lo: float, hi: float, kind: LoadKind) -> bool:
    if kind == LoadKind.CONCURRENCY:
        return hi - lo <= max(1.0, RESOLUTION * lo)
    return hi - lo <= RESOLUTION * lo


def _step(load: float, factor: float, kind: LoadKind) -> float:
    nxt = load * factor
    return float(max(1, math.floor(nxt))) if kind == LoadKind.CONCURRENCY else nxt


def _stop(
    probes: Sequence[Probe], kind: LoadKind, ceiling: float | None, limit: float | None = None
) -> CapacityStop | None:
    """Why no further probe is needed (None: one is)."""
    if probes and probes[-1].failed > FAILED_SHARE:
        return CapacityStop.FAILED
    lo, hi = _bracket(probes)
    if _saturated(probes, limit):
        return CapacityStop.SATURATED
    if lo is None:
        floor = min(p.load for p in probes)
        at_bottom = kind == LoadKind.CONCURRENCY and floor <= 1
        return CapacityStop.NEVER_MET if at_bottom else None
    if hi is None:
        return _top(lo.load, ceiling, limit)
    if _descent_miss(probes, hi):
        return None
    return CapacityStop.BRACKETED if _narrow(lo.load, hi.load, kind) else None


def _top(held: float, ceiling: float | None, limit: float | None) -> CapacityStop | None:
    """Why the ramp cannot go above ``held`` (None: it can)."""
    if ceiling is not None and held >= ceiling and (limit is None or ceiling <= limit):
        return CapacityStop.CEILING
    return CapacityStop.LIMITED if limit is not None and held >= limit else None


def next_load(
    probes: Sequence[Probe],
    *,
    start: float,
    kind: LoadKind,
    ceiling: float | None = None,
    limit: float | None = None,
) -> float | None:
    """The next load to probe after ``probes`` (None: the search is over); ``limit``: the most
    load a probe can exercise (a closed loop's requests per probe), never probed above."""
    if not probes:
        return start if limit is None else min(start, limit)
    if len(probes) >= PROBES or _stop(probes, kind, ceiling, limit) is not None:
        return None
    lo, hi = _bracket(probes)
    if lo is None:
        return _step(min(p.load for p in probes), 0.5, kind)
    if hi is None:
        top = min(x for x in (ceiling, limit, math.inf) if x is not None)
        return min(_step(lo.load, 2.0, kind), top)
    if _descent_miss(probes, hi):
        return hi.load
    mid = (lo.load + hi.load) / 2
    return float(math.floor(mid)) if kind == LoadKind.CONCURRENCY else mid


def _named(lo: Probe) -> float:
    """The load a search names for its lower end: a rate never above what it served."""
    return lo.load if lo.served is None else min(lo.load, lo.served)


def _estimate(lo: Probe, hi: Probe) -> float | None:
    """Where the binding objective crosses its limit, linearly between the two ends (None: the
    upper end not sustained: its latencies are a queue's)."""
    if not hi.sustained:
        return None
    if not (math.isfinite(lo.ratio) and math.isfinite(hi.ratio)) or not lo.ratio <= 1 < hi.ratio:
        return None
    return lo.load + (hi.load - lo.load) * (1 - lo.ratio) / (hi.ratio - lo.ratio)


def conclude(
    probes: Sequence[Probe],
    *,
    kind: LoadKind,
    ceiling: float | None = None,
    interrupted: bool = False,
    limit: float | None = None,
) -> Capacity:
    """What ``probes`` say: the bracket, why the search stopped, the estimate, how sure."""
    lo, hi = _bracket(probes)
    stop = _stop(probes, kind, ceiling, limit) if probes else None
    if interrupted:
        stop = CapacityStop.INTERRUPTED
    elif stop is None:
        stop = CapacityStop.BUDGET if lo is not None else CapacityStop.NEVER_MET
    if stop == CapacityStop.SATURATED:
        lo, hi = probes[-2], None
    if stop == CapacityStop.FAILED:
        lo, hi = None, None
    ends = [p for p in (lo, hi) if p is not None]
    estimate = None if lo is None or hi is None else _estimate(lo, hi)
    return Capacity(
        kind=kind,
        stop=stop,
        capacity=None if lo is None else _named(lo),
        above=None if hi is None else hi.load,
        estimate=estimate,
        sure=bool(ends) and all(p.sure for p in ends),
        probes=tuple(probes),
        limit=limit,
        offered=None if lo is None or _named(lo) >= lo.load else lo.load,
    )
