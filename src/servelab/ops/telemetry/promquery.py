"""Ask a Prometheus server what the deployment's metrics did over a run's window.

For each source (matched by its ``instance`` label) the server is asked, over its HTTP API:
the series at the window's start (``/api/v1/query`` at ``time=start``), the series at the first
scrape at or after the window's end (waited for, bounded by the spec's ``timeout_s``), and the
range in between (``/api/v1/query_range`` with the sampling step) for the gauges; the family
types come from ``/api/v1/metadata``. Counters and histograms are therefore exact to one scrape
interval of the server. Prometheus' own ``job`` and ``instance`` labels are dropped, so the series
read the same as a direct scrape.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from servelab.core.deploy.spec import PrometheusSpec
from servelab.core.telemetry.promapi import PromSeries, read_metadata, read_series
from servelab.core.telemetry.promtext import Exposition, Sample
from servelab.core.telemetry.summary import (
    MetricsSource,
    RunTelemetry,
    Scrape,
    SourceTelemetry,
    summarize,
)
from servelab.errors import MetricsError
from servelab.io.http.client import HttpClient

__all__ = ["PrometheusWindow", "prometheus_telemetry", "query"]

#: The series Prometheus adds to every target itself: not the target's own metrics.
_SYNTHETIC = frozenset({
    "up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_series_added",
    "scrape_samples_post_metric_relabeling",
})  # fmt: skip


@dataclass(frozen=True)
class PrometheusWindow:
    """The run's window in wall-clock seconds (Prometheus' time), and the gauge sampling step."""

    start: float
    end: float
    step_s: float


async def query(
    http: HttpClient, base: str, path: str, params: Mapping[str, str], timeout: float
) -> Any:
    """One API call; its ``data``, or :class:`MetricsError` naming what the server said."""
    url = f"{base}{path}?{urlencode(params)}"
    got = await http.probe(url, timeout=timeout, body_limit=None)
    if not got.ok:
        raise MetricsError(f"Prometheus {path}: {got.describe()}")
    try:
        doc = json.loads(got.body)
    except ValueError:
        raise MetricsError(f"Prometheus {path}: the answer is not JSON") from None
    if not isinstance(doc, dict) or doc.get("status") != "success":
        raise MetricsError(f"Prometheus {path}: {str(doc)[:200]}")
    return doc.get("data")


def _own(data: Any, where: str) -> list[PromSeries]:
    """The series of a query's ``data`` that are the target's own (not Prometheus' synthetic)."""
    return [s for s in read_series(data, where) if s.name not in _SYNTHETIC]


def _vector(data: Any, types: Mapping[str, str]) -> Exposition:
    samples = (Sample(s.name, s.labels, s.points[0][1]) for s in _own(data, "/api/v1/query"))
    return Exposition(tuple(s for s in samples if math.isfinite(s.value)), types)  # NaN: none


def _matrix(data: Any, types: Mapping[str, str], start: float) -> list[Scrape]:
    by_time: dict[float, list[Sample]] = {}
    for series in _own(data, "/api/v1/query_range"):
        for t, value in series.points:
            if math.isfinite(value):  # NaN or ±Inf: not reported, as in a scrape
                by_time.setdefault(t, []).append(Sample(series.name, series.labels, value))
    return [Scrape(t - start, Exposition(tuple(s), types)) for t, s in sorted(by_time.items())]


async def _types(http: HttpClient, prom: PrometheusSpec) -> dict[str, str]:
    data = await query(http, prom.url, "/api/v1/metadata", {}, prom.timeout_s)
    return read_metadata(data, "/api/v1/metadata")


async def _scraped_after(
    http: HttpClient, prom: PrometheusSpec, instance: str, end: float
) -> float:
    """The time of the server's first scrape of ``instance`` at or after ``end`` (waited for)."""
    expr = f'timestamp(up{{instance="{instance}"}})'
    deadline = time.monotonic() + prom.timeout_s
    while True:
        data = await query(http, prom.url, "/api/v1/query", {"query": expr}, prom.timeout_s)
        rows = read_series(data, "/api/v1/query")
        if rows and rows[0].points[0][1] >= end:
            return rows[0].points[0][1]
        if time.monotonic() > deadline:
            raise MetricsError(
                f"Prometheus has not scraped {instance} since the run ended "
                f"(waited {prom.timeout_s:g} s)"
            )
        await asyncio.sleep(0.2)


async def _source(
    http: HttpClient, prom: PrometheusSpec, source: MetricsSource, window: PrometheusWindow,
    types: Mapping[str, str],
) -> SourceTelemetry:  # fmt: skip
    expr, duration = f'{{instance="{source.instance}"}}', window.end - window.start
    try:
        after_t = await _scraped_after(http, prom, source.instance, window.end)
        ask = {"query": expr, "time": f"{window.start:.3f}"}
        before = _vector(await query(http, prom.url, "/api/v1/query", ask, prom.timeout_s), types)
        ask = {"query": expr, "time": f"{after_t:.3f}"}
        after = _vector(await query(http, prom.url, "/api/v1/query", ask, prom.timeout_s), types)
        ask = {"query": expr, "start": f"{window.start:.3f}", "end": f"{window.end:.3f}",
               "step": f"{max(window.step_s, 0.001):g}"}  # fmt: skip
        during = _matrix(
            await query(http, prom.url, "/api/v1/query_range", ask, prom.timeout_s), types,
            window.start,
        )  # fmt: skip
    except MetricsError as exc:
        return summarize(source, [Scrape(0.0, None, str(exc))], duration)
    if not before.samples:
        reason = f"Prometheus holds no sample of {source.instance} at the run's start"
        return summarize(source, [Scrape(0.0, None, reason)], duration)
    scrapes = [Scrape(0.0, before), *during, Scrape(after_t - window.start, after)]
    return summarize(source, scrapes, duration)


async def prometheus_telemetry(
    http: HttpClient,
    prom: PrometheusSpec,
    sources: Sequence[MetricsSource],
    window: PrometheusWindow,
) -> RunTelemetry:
    """Every source over ``window``, asked of the Prometheus server at ``prom.url``."""
    try:
        types = await _types(http, prom)
    except MetricsError:
        types = {}  # the suffix rules of core.telemetry.promtext still type the families
    got = await asyncio.gather(*(_source(http, prom, s, window, types) for s in sources))
    return RunTelemetry("prometheus", window.end - window.start, tuple(got))
