"""What the router and the engines said about one run, from their metrics (pure, typed).

A run is watched through its *sources*: the router's Prometheus endpoint and every engine's
``/metrics``. Each source is scraped before the run, sampled during it and scraped after it (or
asked of a Prometheus server over the same window). :func:`summarize` turns those scrapes into a
:class:`SourceTelemetry`: counters as deltas and rates, histograms as the run's own quantiles,
gauges as time series. A source that never answered is ``unknown`` with the reason, never healthy
and never zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from servelab.core.redacted import StoredUrl
from servelab.core.telemetry.promtext import (
    Exposition,
    counter_deltas,
    family_kind,
    gauge_series,
    histogram_quantiles,
)

__all__ = [
    "GENERATED_TOKENS",
    "QUANTILES",
    "MetricsSource",
    "RunTelemetry",
    "Scrape",
    "SourceTelemetry",
    "generated_tokens_per_s",
    "instance_of",
    "series_name",
    "summarize",
]

#: The quantiles a histogram is reduced to per run.
QUANTILES = (0.5, 0.9, 0.99)

SourceKind = Literal["router", "engine"]


@dataclass(frozen=True)
class MetricsSource:
    """One metrics endpoint of the deployment: ``url`` as reachable from here."""

    service: str
    kind: SourceKind
    url: StoredUrl
    #: How a Prometheus server names this target (``host:port`` of the scraped URL).
    instance: str = ""
    #: The engine's role in the deployment (``prefill``/``decode``; empty: unknown or a router).
    role: str = ""


@dataclass(frozen=True)
class Scrape:
    """One look at a source: ``at_s`` seconds after the run started; no exposition = no answer."""

    at_s: float
    exposition: Exposition | None
    error: str | None = None


#: The engines' output-token counters (SGLang's and vLLM's names).
GENERATED_TOKENS = ("sglang:generation_tokens_total", "vllm:generation_tokens_total")


def generated_tokens_per_s(run: RunTelemetry, services: Sequence[str]) -> float | None:
    """Output tokens per second the ``services`` (the decodes) counted themselves over the run;
    None when none of them answered (never zero for "unknown")."""
    total, seen = 0.0, False
    for source in run.sources:
        if source.service not in services or source.state != "ok":
            continue
        for name in GENERATED_TOKENS:
            value = source.counter(name)
            if value is not None:
                total, seen = total + value, True
    return total / run.duration_s if seen and run.duration_s > 0 else None


def instance_of(url: str) -> str:
    """``host:port`` of ``url``: how Prometheus names a target it scrapes at that URL."""
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}"


def series_name(name: str, labels: Sequence[tuple[str, str]]) -> str:
    """``name{a="x",b="y"}`` (labels sorted; ``name`` alone without labels)."""
    if not labels:
        return name
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels))
    return f"{name}{{{inner}}}"


@dataclass(frozen=True)
class SourceTelemetry:
    """One source over one run."""

    service: str
    kind: SourceKind
    url: StoredUrl
    state: Literal["ok", "unknown"]
    reason: str | None = None
    scrapes: int = 0
    duration_s: float = 0.0
    #: series → increase over the run
    counters: Mapping[str, float] = field(default_factory=dict)
    #: series → increase per second over the run
    rates: Mapping[str, float] = field(default_factory=dict)
    #: histogram series (without ``le``) → {"p50": value | None, ...}
    quantiles: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)
    #: gauge series → [[seconds after start, value], ...]
    gauges: Mapping[str, Sequence[tuple[float, float]]] = field(default_factory=dict)
    #: the engine's role (``prefill``/``decode``), from its :class:`MetricsSource`
    role: str = ""

    def counter(self, name: str, **labels: str) -> float | None:
        """The delta of one counter series (exact labels), or of the sum of all its label sets
        when no label is given; None when the source never exposed it."""
        if labels:
            return self.counters.get(series_name(name, tuple(labels.items())))
        hits = [v for k, v in self.counters.items() if k == name or k.startswith(name + "{")]
        return sum(hits) if hits else None


@dataclass(frozen=True)
class RunTelemetry:
    """Every source of one run, and how they were read (``scrape`` or ``prometheus``)."""

    via: Literal["scrape", "prometheus"]
    duration_s: float
    sources: tuple[SourceTelemetry, ...] = ()

    def source(self, service: str) -> SourceTelemetry | None:
        return next((s for s in self.sources if s.service == service), None)

    @property
    def unknown(self) -> list[str]:
        return [s.service for s in self.sources if s.state == "unknown"]


def _families(exp: Exposition, kind: str) -> set[str]:
    out = set()
    for s in exp.samples:
        if family_kind(s.name, s.labels, exp.types) == kind and s.name.endswith("_bucket"):
            out.add(s.name[: -len("_bucket")])
    return out


def _gauge_names(exp: Exposition) -> set[str]:
    return {s.name for s in exp.samples if family_kind(s.name, s.labels, exp.types) == "gauge"}


def _unknown(
    source: MetricsSource, scrapes: Sequence[Scrape], duration_s: float
) -> SourceTelemetry:
    errors = [s.error for s in scrapes if s.error]
    reason = errors[-1] if errors else "no scrape answered"
    return SourceTelemetry(
        source.service, source.kind, source.url, "unknown", reason, 0, duration_s,
        role=source.role,
    )  # fmt: skip


def summarize(
    source: MetricsSource, scrapes: Sequence[Scrape], duration_s: float
) -> SourceTelemetry:
    """The run as ``source`` saw it: the first and last answered scrapes bound the counters and
    histograms; every answered scrape is a point of the gauges. ``unknown`` without two answers."""
    answered = [(s.at_s, s.exposition) for s in scrapes if s.exposition is not None]
    if len(answered) < 2:
        return _unknown(source, scrapes, duration_s)
    before, after = answered[0][1], answered[-1][1]
    deltas = counter_deltas(before, after)
    counters = {series_name(n, labels): v for (n, labels), v in deltas.items()}
    span = max(answered[-1][0] - answered[0][0], 1e-9)
    quantiles: dict[str, dict[str, float | None]] = {}
    for family in sorted(_families(after, "histogram")):
        per_labels = histogram_quantiles(before, after, family, QUANTILES)
        for labels, qs in per_labels.items():
            quantiles[series_name(family, labels)] = {
                f"p{round(q * 100)}": v for q, v in qs.items()
            }
    gauges: dict[str, list[tuple[float, float]]] = {}
    for name in sorted(_gauge_names(after)):
        for labels, points in gauge_series(answered, name).items():
            gauges[series_name(name, labels)] = points
    return SourceTelemetry(
        source.service, source.kind, source.url, "ok", None, len(answered), duration_s,
        counters, {k: v / span for k, v in counters.items()}, quantiles, gauges, source.role,
    )  # fmt: skip
