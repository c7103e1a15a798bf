"""What an A/B or a tune compared its arms on, in words: the one source of each metric's unit,
axis label, description and column heading, read by every renderer of an A/B or a tune (the text,
the markdown pages, the plots), so two renderers of one result cannot disagree on its unit."""

from __future__ import annotations

from servelab.core.ab.result import AbMetric
from servelab.report.text import level_label

__all__ = ["METRIC_AXES", "METRIC_UNITS", "METRIC_WORDS", "metric_where"]

#: Each metric's unit in the tables.
METRIC_UNITS = {AbMetric.THROUGHPUT: "tok/s", AbMetric.GOODPUT: "good req/s",
                AbMetric.CAPACITY: "capacity"}  # fmt: skip
#: Each metric's value axis in a plot (one value per visit, or their mean ± σ).
METRIC_AXES = {
    AbMetric.THROUGHPUT: "output tokens/s",
    AbMetric.GOODPUT: "good requests/s (met the SLO)",
    AbMetric.CAPACITY: "capacity (largest load meeting the SLO)",
}
#: What each metric is, in words.
METRIC_WORDS = {
    AbMetric.THROUGHPUT: "Steady-state output-token throughput",
    AbMetric.GOODPUT: "Goodput (requests per second that met every objective of the SLO)",
    AbMetric.CAPACITY: "Capacity (the largest load meeting the SLO, each visit's bounded search: "
    "where the binding objective crosses its limit)",
}


def metric_where(metric: AbMetric, level: int) -> str:
    """Where a value was measured: ``C64``, ``trace`` (a replay's one level) or ``capacity`` (an
    A/B or tune on capacity: one search per visit, not a concurrency)."""
    return "capacity" if metric == AbMetric.CAPACITY else level_label(level)
