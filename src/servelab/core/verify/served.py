"""Did a worker serve requests, and how many: read from the real counters (pure).

Two real signals count a PD worker's requests, both Prometheus counters (``tests/contracts/``):

1. **The engine's own** (:attr:`Signal.ENGINE`): the requests it finished, in its ``/metrics``
   (:attr:`~servelab.core.engines.Engine.served_counter`): SGLang's
   ``sglang:num_requests_total`` (only with ``--enable-metrics``; the series appears once a
   request finished), vLLM's ``vllm:request_success_total`` over every ``finished_reason`` (on
   unless ``--disable-log-stats``).
2. **The router's, per worker** (:attr:`Signal.ROUTER`): sglang-router 0.3.2's
   ``smg_worker_cb_outcomes_total{worker=URL,outcome="success"}`` (the attempts that worker
   answered successfully), vllm-router 0.1.17's ``vllm_router_processed_requests_total{worker=
   URL}``; the series appear once first observed.

Reading is engine-blind, as :func:`~servelab.core.engines.canonical_metrics` is: a scrape
holds one engine's (or one router's) names. The engine's counter is read when its ``/metrics``
answered with the engine's own series; else the router's; else the worker cannot be counted and
:class:`Gap` says why. A count needs the same signal before and after (:func:`counted`).

Cold or warm (:mod:`servelab.core.verify.coldstart`) reads the engine's counter only: a router's
count does not restart with the engine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from servelab.core.engines import ENGINES
from servelab.core.telemetry.promtext import Exposition, parse_exposition
from servelab.errors import MetricsError

__all__ = ["Count", "Gap", "Scrapes", "Signal", "counted", "engine_count", "engine_served"]


class Signal(StrEnum):
    """Which real counter counted a worker's requests (values are stored: never change one)."""

    ENGINE = "engine"  # the worker's own /metrics
    ROUTER = "router"  # the router's per-worker counter


class Gap(StrEnum):
    """Why a worker's requests cannot be counted (values are stored: never change one)."""

    #: its ``/metrics`` did not answer 200 (SGLang without ``--enable-metrics``: 404), and the
    #: router's per-worker counter could not be read either
    NO_METRICS = "no_metrics"
    #: its ``/metrics`` answered without the engine's own series (vLLM with
    #: ``--disable-log-stats``), and the router's per-worker counter could not be read either
    NO_ENGINE_SERIES = "no_engine_series"


@dataclass(frozen=True)
class Scrapes:
    """One moment's metrics about a worker: its own ``/metrics`` and the router's (None: did not
    answer, or no router)."""

    own: Exposition | None
    router: Exposition | None


@dataclass(frozen=True)
class Count:
    """A worker's count before and after, by one ``signal`` (its ``counter``'s name)."""

    signal: Signal
    counter: str
    before: int
    after: int

    @property
    def grew(self) -> bool:
        return self.after > self.before


def _sum(exp: Exposition, name: str, labels: dict[str, str]) -> int | None:
    """The summed value of ``name``'s samples that carry ``labels`` (None: the sum is no finite
    number, as two samples near 1e308 make: not reported, like a NaN sample)."""
    wanted = labels.items()
    total = sum(s.value for s in exp.samples if s.name == name and wanted <= dict(s.labels).items())
    return round(total) if math.isfinite(total) else None


def engine_served(own: Exposition | None) -> tuple[str, int] | None:
    """The engine's own counter and its value in its ``/metrics`` (None: no answer, or none of
    the engine's series: its metrics are off)."""
    if own is None:
        return None
    for desc in ENGINES.values():
        if any(s.name.startswith(desc.metric_prefix) for s in own.samples):
            total = _sum(own, desc.served_counter, {})
            return None if total is None else (desc.served_counter, total)
    return None


def engine_count(metrics: str | None) -> int | None:
    """The engine's own count of finished requests from the text of its ``/metrics`` (None: no
    answer, a body that does not parse, or none of the engine's series)."""
    try:
        got = None if metrics is None else engine_served(parse_exposition(metrics))
    except MetricsError:
        return None
    return None if got is None else got[1]


def _router_served(router: Exposition | None, url: str) -> tuple[str, int] | None:
    """The router's counter of ``url``'s requests (absent series: 0, not yet observed)."""
    if router is None:
        return None
    for desc in ENGINES.values():
        if any(s.name.startswith(desc.router_metric_prefix) for s in router.samples):
            labels = {"worker": url.rstrip("/"), **desc.router_worker_match}
            total = _sum(router, desc.router_worker_counter, labels)
            return None if total is None else (desc.router_worker_counter, total)
    return None


def counted(url: str, before: Scrapes, after: Scrapes) -> Count | Gap:
    """The worker at ``url`` counted before and after by one signal: its own counter when both
    scrapes had it, else the router's; else why not."""
    own = engine_served(before.own), engine_served(after.own)
    if own[0] is not None and own[1] is not None:
        return Count(Signal.ENGINE, own[0][0], own[0][1], own[1][1])
    routed = _router_served(before.router, url), _router_served(after.router, url)
    if routed[0] is not None and routed[1] is not None:
        return Count(Signal.ROUTER, routed[0][0], routed[0][1], routed[1][1])
    answered = before.own is not None and after.own is not None
    return Gap.NO_ENGINE_SERIES if answered else Gap.NO_METRICS
