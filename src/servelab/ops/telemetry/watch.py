"""Watch the router's and the engines' metrics around a run.

``async with MetricsWatch(op) as watch: ...run...`` scrapes every source (the router's Prometheus
port, each engine's ``/metrics``) before the run, every ``interval_s`` during it and after it; on
exit ``watch.result`` is the :class:`~servelab.core.telemetry.summary.RunTelemetry`. With
``[prometheus] url`` in the spec the same window is asked of that server instead
(:mod:`servelab.ops.telemetry.promquery`). A scrape that fails is recorded with its reason; a source
without two answers is ``unknown``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

from servelab.core.deploy.routers import RouterOptions
from servelab.core.deploy.spec import PrometheusSpec
from servelab.core.telemetry.promtext import parse_exposition
from servelab.core.telemetry.summary import (
    MetricsSource,
    RunTelemetry,
    Scrape,
    instance_of,
    summarize,
)
from servelab.errors import MetricsError
from servelab.io.http.client import HttpClient
from servelab.ops.context import Operation
from servelab.ops.telemetry.promquery import PrometheusWindow, prometheus_telemetry

__all__ = ["MetricsPlan", "MetricsWatch", "metrics_plan", "metrics_sources", "scrape_once"]

_LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class MetricsPlan:
    """What to watch around each run: the sources, and the Prometheus server to ask if any."""

    sources: tuple[MetricsSource, ...]
    prometheus: PrometheusSpec | None = None


async def metrics_plan(op: Operation) -> MetricsPlan:
    """Every source of ``op``'s deployment, and its ``[prometheus]`` server if it names one."""
    return MetricsPlan(tuple(await metrics_sources(op)), op.spec.prometheus)


async def metrics_sources(op: Operation) -> list[MetricsSource]:
    """The router(s) started by servelab (their Prometheus port) and every prefill/decode."""
    spec, out = op.spec, []
    named = spec.prometheus.instances if spec.prometheus else {}
    for name, svc in spec.services.items():
        if svc.role == "router" and svc.start == "router":
            port = (svc.router or RouterOptions()).prometheus_port
            seen_there = f"http://{_LOOPBACK}:{port}/metrics"
            url = await op.host(name).http_url(f"http://{_LOOPBACK}:{port}") + "/metrics"
            out.append(MetricsSource(name, "router", url, named.get(name, instance_of(seen_there))))
        elif svc.role in ("prefill", "decode"):
            url = await op.url(name, "/metrics")
            instance = named.get(name, instance_of(svc.url))
            out.append(MetricsSource(name, "engine", url, instance, svc.role))
    return out


async def scrape_once(
    http: HttpClient, source: MetricsSource, at_s: float, timeout: float
) -> Scrape:
    """One GET of ``source``: its exposition, or the reason there is none."""
    got = await http.probe(source.url, timeout=timeout, body_limit=None)
    if not got.ok:
        return Scrape(at_s, None, got.describe())
    try:
        return Scrape(at_s, parse_exposition(got.body, source.url))
    except MetricsError as exc:
        return Scrape(at_s, None, str(exc))


class MetricsWatch:
    """Scrapes (or asks Prometheus about) every source around the ``async with`` body."""

    def __init__(
        self,
        sources: Sequence[MetricsSource],
        *,
        prometheus: PrometheusSpec | None = None,
        interval_s: float = 1.0,
        timeout_s: float = 5.0,
    ) -> None:
        self._prom, self._interval, self._timeout = prometheus, interval_s, timeout_s
        self._sources = list(sources)
        self._scrapes: dict[str, list[Scrape]] = {}
        self._http = HttpClient()
        self._sampler: asyncio.Task[None] | None = None
        self._t0 = 0.0
        self._wall0 = 0.0
        self.result: RunTelemetry | None = None

    @classmethod
    async def of(cls, op: Operation, *, interval_s: float = 1.0) -> MetricsWatch:
        """A watch over every source of ``op``'s deployment (its Prometheus server if named)."""
        return cls(await metrics_sources(op), prometheus=op.spec.prometheus, interval_s=interval_s)

    @property
    def sources(self) -> list[MetricsSource]:
        return list(self._sources)

    async def _scrape_all(self) -> None:
        at = time.monotonic() - self._t0
        got = await asyncio.gather(
            *(scrape_once(self._http, s, at, self._timeout) for s in self.sources)
        )
        for source, scrape in zip(self.sources, got, strict=True):
            self._scrapes.setdefault(source.service, []).append(scrape)

    async def _sample(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            await self._scrape_all()

    async def __aenter__(self) -> MetricsWatch:
        self._t0, self._wall0 = time.monotonic(), time.time()
        if self._prom is None:
            await self._scrape_all()
            self._sampler = asyncio.create_task(self._sample())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._sampler is not None:
                self._sampler.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._sampler
            if exc_type is None or issubclass(exc_type, Exception):
                self.result = await self._conclude()
        finally:
            await self._http.aclose()

    async def _conclude(self) -> RunTelemetry:
        duration = time.monotonic() - self._t0
        prom = self._prom
        if prom is not None:
            window = PrometheusWindow(self._wall0, self._wall0 + duration, self._interval)
            return await prometheus_telemetry(self._http, prom, self.sources, window)
        await self._scrape_all()
        return RunTelemetry(
            "scrape",
            duration,
            tuple(summarize(s, self._scrapes.get(s.service, []), duration) for s in self.sources),
        )
