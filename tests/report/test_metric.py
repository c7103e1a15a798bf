"""Every renderer of an A/B names the compared metric's unit from one source: the plot's axis, the
A/B page's arms and comparisons, the A/B text (a goodput or capacity A/B is not "tokens/s")."""

from __future__ import annotations

import dataclasses

import pytest

from servelab.core.ab.record import AbRunRecord
from servelab.core.ab.result import CAPACITY_LEVEL, AbDesign, AbMetric
from servelab.core.ledger.codec import decode
from servelab.report import ab as ab_report
from servelab.report import metric, perfplan
from servelab.report.plots import ab_figure


def _record(compared: AbMetric) -> AbRunRecord:
    level = CAPACITY_LEVEL if compared == AbMetric.CAPACITY else 64
    doc = {
        "id": 7, "at": "2026-01-01T00:00:00.000Z", "service": "decode", "knob": "K",
        "config": {},
        "result": {
            "service": "decode", "knob": "K", "baseline": "256", "candidate": "512",
            "arms": [{"value": "256", "throughput": {str(level): [3.0, 3.5]}},
                     {"value": "512", "throughput": {str(level): [4.0, 4.5]}}],
            "comparisons": [{"concurrency": level, "baseline": "256", "candidate": "512",
                             "ratio": 1.3, "change": 0.3, "ci": [1.1, 1.5], "p_value": 0.01,
                             "verdict": "better", "n_baseline": 2, "n_candidate": 2}],
        },
    }  # fmt: skip
    record = decode(AbRunRecord, doc)
    design = AbDesign(concurrencies=(level,), metric=compared, slo="ttft p99 < 200ms")
    return dataclasses.replace(record, result=dataclasses.replace(record.result, design=design))


def test_public_api() -> None:
    assert set(metric.__all__) == {"METRIC_AXES", "METRIC_UNITS", "METRIC_WORDS", "metric_where"}


@pytest.mark.parametrize("compared", [AbMetric.GOODPUT, AbMetric.CAPACITY])
def test_a_goodput_or_capacity_ab_is_never_labelled_tokens_per_second(compared: AbMetric) -> None:
    record = _record(compared)
    axis = ab_figure(record.result, title="t").axes[0]
    assert axis.get_ylabel() == f"{metric.METRIC_AXES[compared]} (mean ± σ)"
    assert "tokens/s" not in axis.get_ylabel()
    page = perfplan.ab_markdown(record, None)
    assert f"## Arms ({metric.METRIC_UNITS[compared]})" in page
    assert "tok/s" not in page and "tokens/s" not in page
    text = ab_report.ab_markdown(record.result)
    assert metric.METRIC_UNITS[compared] in text


def test_a_throughput_ab_keeps_its_unit_and_its_concurrencies() -> None:
    record = _record(AbMetric.THROUGHPUT)
    axis = ab_figure(record.result, title="t").axes[0]
    assert axis.get_ylabel() == "output tokens/s (mean ± σ)"
    assert axis.get_xlabel() == "concurrency"
    assert "## Arms (tok/s)" in perfplan.ab_markdown(record, None)
    assert perfplan.comparison_rows(record.result)[0][0] == "C64"


def test_a_capacity_ab_names_no_concurrency() -> None:
    record = _record(AbMetric.CAPACITY)
    assert perfplan.comparison_rows(record.result)[0][0] == "capacity"
    axis = ab_figure(record.result, title="t").axes[0]
    assert [t.get_text() for t in axis.get_xticklabels()] == ["capacity"]
