"""``bench --find-capacity``: the largest concurrency (or arrival rate) that meets the SLO, by the
bounded search of :mod:`servelab.core.load.capacity`, each probe one bench run (recorded in the
ledger as every run is).

A closed loop's probe runs the config at one concurrency; an open loop's (``rate`` set) at one
rate, the largest of its ``concurrencies`` capping the requests in flight (as ``--rate`` does).
A rate probe sends enough requests to sustain its rate for a span (:func:`~servelab.core.load.
capacity.rate_requests`): a burst says nothing about a rate.
A config without a warm-up can be given one before the first probe alone (``warm_first``):
a deployment's first requests pay its one-time warm-up, which must not count as a miss.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field, replace

from servelab.core.bench.contract import BenchConfig, BenchProgressFn, RunResult
from servelab.core.load.capacity import (
    PROBE_SPAN_S,
    Capacity,
    LoadKind,
    Probe,
    conclude,
    first_warmup,
    next_load,
    rate_limit,
    rate_probe,
    rate_requests,
)
from servelab.core.load.metrics import SloAttainment
from servelab.core.load.pace import in_flight_peak, served_rate
from servelab.io.ledger.ledger import Ledger
from servelab.ops.bench.bench import run_bench
from servelab.ops.telemetry.watch import MetricsPlan

__all__ = [
    "CapacityResult",
    "find_capacity",
    "first_probe_warmup",
    "probe_of",
    "request_limit",
    "search_bounds",
]


@dataclass(slots=True)
class CapacityResult:
    """A search: its config (with the SLO), every probe's run, and what the search concluded."""

    config: BenchConfig
    capacity: Capacity
    runs: list[RunResult] = field(default_factory=list)
    #: the seconds of arrivals each rate probe sustained at the least (None: a concurrency)
    span_s: float | None = None

    @property
    def n_failed(self) -> int:
        """Failed requests over every probe."""
        return sum(r.metrics.n_failed for r in self.runs)


def search_bounds(config: BenchConfig) -> tuple[LoadKind, float, float | None]:
    """What the search varies, where it starts and its ceiling: the rate from ``rate`` (no
    ceiling), else the concurrency from the smallest of ``concurrencies`` up to the largest
    (one value: no ceiling but the probe budget)."""
    if config.rate is not None:
        return LoadKind.RATE, config.rate, None
    levels = config.concurrencies
    ceiling = float(max(levels)) if len(levels) > 1 else None
    return LoadKind.CONCURRENCY, float(min(levels)), ceiling


def request_limit(
    config: BenchConfig, kind: LoadKind, span_s: float = PROBE_SPAN_S
) -> float | None:
    """The most load a probe can exercise: a closed loop never has more requests in flight than
    the requests it sends; an open loop's rate, the highest its most requests sustain for
    ``span_s`` seconds (:func:`~servelab.core.load.capacity.rate_limit`)."""
    if kind == LoadKind.CONCURRENCY:
        return float(config.requests)
    return rate_limit(config.requests, span_s)


def _binding_ratio(att: SloAttainment) -> float:
    """The largest value-over-limit of the objectives (NaN: none has a value)."""
    ratios = [o.value_ms / o.objective.limit_ms for o in att.objectives]
    return max((r for r in ratios if math.isfinite(r)), default=math.nan)


def probe_of(load: float, run: RunResult, kind: LoadKind = LoadKind.CONCURRENCY) -> Probe:
    """A probe from its run: the SLO's verdict, the throughput, the binding ratio, the share of
    its requests that failed (cut ones not counted), the share cut (by ``--deadline``); a rate's,
    the rate its requests were served at (:func:`~servelab.core.load.pace.served_rate`: not
    sustained, not met) and whether they took every slot of the in-flight limit (the run's
    concurrency)."""
    att = run.slo
    if att is None:
        raise ValueError("a capacity probe needs an SLO")
    m = run.metrics
    throughput = m.steady_throughput if m.steady_throughput is not None else m.output_throughput
    failed = m.n_failed / max(1, m.n_requests - m.n_cut)
    cut = m.n_cut / max(1, m.n_requests)
    ratio = _binding_ratio(att)
    if kind == LoadKind.CONCURRENCY:
        return Probe(load, att.met, att.sure, throughput, ratio, run.run_id, failed, cut=cut)
    return rate_probe(load, met=att.met, sure=att.sure, throughput=throughput, ratio=ratio,
                      served=served_rate(load, run.records), run_id=run.run_id, failed=failed,
                      capped=in_flight_peak(run.records) >= run.concurrency, cut=cut)  # fmt: skip


def _probe_config(config: BenchConfig, kind: LoadKind, load: float, span_s: float) -> BenchConfig:
    if kind == LoadKind.RATE:
        requests = rate_requests(load, config.requests, span_s)
        return replace(config, rate=load, concurrencies=(max(config.concurrencies),), repeat=1,
                       requests=requests)  # fmt: skip
    return replace(config, concurrencies=(round(load),), repeat=1)


def first_probe_warmup(config: BenchConfig) -> int:
    """The warm-up requests ``find_capacity(warm_first=True)`` sends before its first probe (0:
    the config has its own warm-up, before every probe)."""
    if config.warmup:
        return 0
    kind, start, _ceiling = search_bounds(config)
    return first_warmup(kind, start, config.requests)


def _warmed(config: BenchConfig, warmup: int) -> BenchConfig:
    """``config`` with ``warmup`` requests first; the ramp left as a probe without one has it
    (a cold warm-up's median E2E is no request's time)."""
    if not warmup:
        return config
    return replace(config, warmup=warmup, ramp_s=0.0 if config.ramp_s is None else config.ramp_s)


async def find_capacity(
    config: BenchConfig,
    *,
    progress: BenchProgressFn | None = None,
    ledger: Ledger | None = None,
    stop: asyncio.Event | None = None,
    metrics: MetricsPlan | None = None,
    warm_first: bool = False,
    span_s: float = PROBE_SPAN_S,
) -> CapacityResult:
    """Probe until the search is over (or ``stop`` is set); every probe recorded in ``ledger``;
    ``warm_first``: a config without a warm-up is warmed up before its first probe
    (:func:`first_probe_warmup`); ``span_s``: the seconds of arrivals a rate probe sustains."""
    if config.slo is None:
        raise ValueError("finding the capacity needs an SLO")
    kind, start, ceiling = search_bounds(config)
    limit = request_limit(config, kind, span_s)
    probes: list[Probe] = []
    runs: list[RunResult] = []
    interrupted = False
    while (
        load := next_load(probes, start=start, kind=kind, ceiling=ceiling, limit=limit)
    ) is not None:
        probe_config = _probe_config(config, kind, load, span_s)
        if warm_first and not probes:
            probe_config = _warmed(probe_config, first_probe_warmup(config))
        got = await run_bench(
            probe_config, progress=progress, ledger=ledger, stop=stop, metrics=metrics
        )
        runs += got.runs
        if got.interrupted or not got.runs:
            interrupted = True
            break
        probes.append(probe_of(load, got.runs[-1], kind))
    capacity = conclude(probes, kind=kind, ceiling=ceiling, interrupted=interrupted, limit=limit)
    span = span_s if kind == LoadKind.RATE else None
    return CapacityResult(config, capacity, runs, span)
