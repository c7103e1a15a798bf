"""Prometheus text exposition, parsed without I/O, and what two scrapes of it say about a run.

:func:`parse_exposition` reads the text format a ``/metrics`` endpoint serves (``# TYPE`` lines,
samples with escaped label values, ``NaN``/``+Inf``, optional timestamps). A sample whose value is
``NaN``, ``+Inf`` or ``-Inf`` is read and left out: it is not reported (a gauge or a counter that
says NaN says no number; every reader after the parser may count on finite values). The run rules
are pure:

- a **counter** becomes the run's delta (``after − before``; a value that went down means the
  process restarted, so the delta is the value after, as Prometheus' ``increase`` treats a reset)
  and a rate over the run's duration;
- a **histogram** becomes the run's own quantiles, interpolated linearly inside the bucket from the
  bucket deltas, as PromQL's ``histogram_quantile`` does;
- a **gauge** stays a time series of the samples taken during the run.

A family's kind comes from its ``# TYPE`` line; without one, ``_total`` names a counter and
``_bucket`` with an ``le`` label a histogram, everything else is a gauge.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from servelab.errors import MetricsError

__all__ = [
    "Exposition",
    "Sample",
    "SeriesKey",
    "bucket_quantile",
    "counter_deltas",
    "family_kind",
    "gauge_series",
    "histogram_quantiles",
    "parse_exposition",
    "series_key",
]

#: ``(metric name, sorted label pairs)``: one time series.
SeriesKey = tuple[str, tuple[tuple[str, str], ...]]

_KINDS = ("counter", "gauge", "histogram", "summary", "untyped", "info", "stateset")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    @property
    def key(self) -> SeriesKey:
        return (self.name, self.labels)

    def label(self, name: str) -> str | None:
        return dict(self.labels).get(name)


@dataclass(frozen=True)
class Exposition:
    """One scrape: its samples and the ``# TYPE`` of each family that declared one."""

    samples: tuple[Sample, ...] = ()
    types: Mapping[str, str] = field(default_factory=dict)

    def values(self) -> dict[SeriesKey, float]:
        return {s.key: s.value for s in self.samples}


def series_key(name: str, labels: Mapping[str, str] | None = None) -> SeriesKey:
    return (name, tuple(sorted((labels or {}).items())))


def _value(text: str, where: str) -> float:
    try:
        return float(text)  # float() reads NaN, +Inf, -Inf and exponents
    except ValueError:
        raise MetricsError(f"{where}: not a number: {text!r}") from None


def _labels(text: str, where: str) -> tuple[tuple[tuple[str, str], ...], int]:
    """Parse ``{a="x",b="y"}`` starting at ``text[0] == "{"``; returns labels and the end index."""
    pairs: list[tuple[str, str]] = []
    i = 1
    while True:
        while i < len(text) and text[i] in " ,":
            i += 1
        if i < len(text) and text[i] == "}":
            return tuple(sorted(pairs)), i + 1
        eq = text.find("=", i)
        if eq < 0 or eq + 1 >= len(text) or text[eq + 1] != '"':
            raise MetricsError(f"{where}: bad label set")
        name, i, chars = text[i:eq].strip(), eq + 2, []
        while i < len(text) and text[i] != '"':
            if text[i] == "\\" and i + 1 < len(text):
                chars.append(_ESCAPES.get(text[i + 1], "\\" + text[i + 1]))
                i += 2
            else:
                chars.append(text[i])
                i += 1
        if i >= len(text):
            raise MetricsError(f"{where}: unterminated label value")
        pairs.append((name, "".join(chars)))
        i += 1


def _sample(line: str, where: str) -> Sample:
    brace, space = line.find("{"), line.find(" ")
    if brace >= 0 and (space < 0 or brace < space):
        name = line[:brace]
        labels, end = _labels(line[brace:], where)
        rest = line[brace + end :].split()
    else:
        name, *rest = line.split()
        labels = ()
    if not name or not rest:
        raise MetricsError(f"{where}: a sample needs a name and a value")
    return Sample(name, labels, _value(rest[0], where))


def parse_exposition(text: str, source: str = "metrics") -> Exposition:
    """Every sample of a text exposition; ``source`` names the endpoint in errors."""
    samples: list[Sample] = []
    types: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE" and parts[3] in _KINDS:
                types[parts[2]] = parts[3]
            continue
        sample = _sample(line, f"{source}: line {number}")
        if math.isfinite(sample.value):  # NaN or ±Inf: not reported
            samples.append(sample)
    return Exposition(tuple(samples), types)


def family_kind(name: str, labels: Iterable[tuple[str, str]], types: Mapping[str, str]) -> str:
    """The kind of the family ``name`` belongs to: counter, histogram, gauge (or summary …)."""
    for suffix in ("_bucket", "_sum", "_count", "_total", "_created", ""):
        if suffix and not name.endswith(suffix):
            continue
        family = name[: len(name) - len(suffix)] if suffix else name
        if family in types:
            return types[family]
        if name in types:
            return types[name]
    if name.endswith("_bucket") and any(k == "le" for k, _ in labels):
        return "histogram"
    return "counter" if name.endswith("_total") else "gauge"


def _counters(exp: Exposition) -> dict[SeriesKey, float]:
    return {
        s.key: s.value
        for s in exp.samples
        if family_kind(s.name, s.labels, exp.types) == "counter" and math.isfinite(s.value)
    }


def counter_deltas(before: Exposition, after: Exposition) -> dict[SeriesKey, float]:
    """Each counter's increase over the run (a reset counts from zero; a new series from zero)."""
    was = _counters(before)
    out: dict[SeriesKey, float] = {}
    for key, now in _counters(after).items():
        prev = was.get(key, 0.0)
        out[key] = now - prev if now >= prev else now
    return out


def bucket_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """PromQL ``histogram_quantile`` over ``(le, cumulative count)`` pairs; None when empty."""
    ordered = sorted(buckets)
    if not ordered or not math.isinf(ordered[-1][0]) or ordered[-1][1] <= 0:
        return None
    rank = q * ordered[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound  # the quantile is above the highest finite bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (
                count - lower_count
            )
        lower_bound, lower_count = bound, count
    return lower_bound


def _buckets(exp: Exposition, family: str) -> dict[tuple[tuple[str, str], ...], dict[float, float]]:
    out: dict[tuple[tuple[str, str], ...], dict[float, float]] = {}
    for s in exp.samples:
        le = s.label("le")
        if s.name == f"{family}_bucket" and le is not None:
            rest = tuple(p for p in s.labels if p[0] != "le")
            out.setdefault(rest, {})[_value(le, family)] = s.value
    return out


def histogram_quantiles(
    before: Exposition, after: Exposition, family: str, qs: Sequence[float]
) -> dict[tuple[tuple[str, str], ...], dict[float, float | None]]:
    """Per label set of ``family``: the run's quantiles, from the bucket deltas."""
    was = _buckets(before, family)
    out: dict[tuple[tuple[str, str], ...], dict[float, float | None]] = {}
    for labels, now in _buckets(after, family).items():
        prev = was.get(labels, {})
        reset = any(count < prev.get(le, 0.0) for le, count in now.items())
        deltas = [(le, count - (0.0 if reset else prev.get(le, 0.0))) for le, count in now.items()]
        out[labels] = {q: bucket_quantile(q, deltas) for q in qs}
    return out


def gauge_series(
    scrapes: Sequence[tuple[float, Exposition]], name: str
) -> dict[tuple[tuple[str, str], ...], list[tuple[float, float]]]:
    """Per label set of gauge ``name``: ``(time, value)`` at every scrape that had it."""
    out: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
    for at, exp in scrapes:
        for s in exp.samples:
            if s.name == name:
                out.setdefault(s.labels, []).append((at, s.value))
    return out
