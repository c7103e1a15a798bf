"""What a Prometheus server's HTTP API answers, read once and checked (sans-I/O).

The ``data`` of ``/api/v1/query`` (a vector: each series' ``value``, one ``[time, "value"]``
pair), of ``/api/v1/query_range`` (a matrix: each series' ``values``, a list of pairs) and of
``/api/v1/metadata`` (``{family: [{"type": ...}, ...]}``) become typed values here; a field that
is missing or of the wrong shape is a :class:`~servelab.errors.MetricsError` naming it
(``result[2].value``). Prometheus' own ``job`` and ``instance`` labels are dropped, so a series
reads as it does in a direct scrape; a value that is not finite (``"NaN"``, ``"+Inf"``) is read as
the float it says, for the caller to leave out as a scrape's parser does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from servelab.errors import MetricsError

__all__ = ["PromSeries", "read_metadata", "read_series"]

_DROP = frozenset({"__name__", "job", "instance"})


@dataclass(frozen=True, slots=True)
class PromSeries:
    """One series of a query's result: its metric name, its labels (sorted, without ``job`` and
    ``instance``) and its points, ``(time, value)`` in the server's wall-clock seconds."""

    name: str
    labels: tuple[tuple[str, str], ...]
    points: tuple[tuple[float, float], ...]


def _point(raw: object, where: str) -> tuple[float, float]:
    if not isinstance(raw, Sequence) or isinstance(raw, str) or len(raw) != 2:
        raise MetricsError(f"{where} is not a [time, value] pair")
    try:
        return float(raw[0]), float(raw[1])
    except (TypeError, ValueError):
        raise MetricsError(f"{where} is not a [time, value] pair of numbers") from None


def _series(raw: object, where: str) -> PromSeries:
    if not isinstance(raw, Mapping):
        raise MetricsError(f"{where} is not an object")
    metric = raw.get("metric", {})
    if not isinstance(metric, Mapping):
        raise MetricsError(f"{where}.metric is not an object of labels")
    labels = tuple(sorted((str(k), str(v)) for k, v in metric.items() if k not in _DROP))
    points: tuple[tuple[float, float], ...]
    if "value" in raw:
        points = (_point(raw["value"], f"{where}.value"),)
    else:
        values = raw.get("values", [])
        if not isinstance(values, list):
            raise MetricsError(f"{where}.values is not a list")
        points = tuple(_point(p, f"{where}.values[{i}]") for i, p in enumerate(values))
    return PromSeries(str(metric.get("__name__", "")), labels, points)


def read_series(data: object, where: str) -> tuple[PromSeries, ...]:
    """The series of a query's ``data`` (``where``: the API path, named in an error)."""
    if data is None:
        return ()
    if not isinstance(data, Mapping):
        raise MetricsError(f"Prometheus {where}: data is not an object")
    result = data.get("result") or []
    if not isinstance(result, list):
        raise MetricsError(f"Prometheus {where}: data.result is not a list")
    try:
        return tuple(_series(item, f"result[{i}]") for i, item in enumerate(result))
    except MetricsError as exc:
        raise MetricsError(f"Prometheus {where}: data.{exc}") from None


def _type(entry: object) -> str:
    """A metadata entry's ``type`` (not an object, or no type: the empty string)."""
    if not isinstance(entry, Mapping):
        return ""
    kind = entry.get("type", "")
    return kind if isinstance(kind, str) else ""


def read_metadata(data: object, where: str) -> dict[str, str]:
    """Each family's type from ``/api/v1/metadata``'s ``data`` (its first entry's ``type``; a
    family without one: the empty string, which types it by its suffix)."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise MetricsError(f"Prometheus {where}: data is not an object")
    types: dict[str, str] = {}
    for name, entries in data.items():
        if not isinstance(entries, list):
            raise MetricsError(f"Prometheus {where}: data.{name} is not a list")
        if entries:
            types[str(name)] = _type(entries[0])
    return types
