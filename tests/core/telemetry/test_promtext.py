"""The Prometheus text parser and the run rules: counters, histograms, gauges (pure)."""

from __future__ import annotations

import math

import pytest

from servelab.core.soak.evidence import parse_metrics
from servelab.core.telemetry import promtext
from servelab.core.telemetry.promtext import (
    Exposition,
    bucket_quantile,
    counter_deltas,
    family_kind,
    gauge_series,
    histogram_quantiles,
    parse_exposition,
    series_key,
)
from servelab.core.telemetry.router import parse_labeled, parse_loads
from servelab.core.verify.coldstart import decode_counts
from servelab.core.verify.served import engine_count
from servelab.errors import MetricsError
from servelab.sim.metrics import WorkerMetrics

TEXT = """\
# HELP smg_worker_cb_state Circuit breaker state.
# TYPE smg_worker_cb_state gauge
smg_worker_cb_state{worker="http://127.0.0.1:1"} 0
smg_worker_cb_state{worker="http://127.0.0.1:2"} 1 1700000000000
# TYPE odd counter
odd{path="a\\"b\\\\c\\nd",x="1"} +Inf
nan_metric NaN
plain_total 3e2
"""


def test_public_api() -> None:
    assert set(promtext.__all__) >= {"parse_exposition", "counter_deltas", "histogram_quantiles"}


def test_samples_labels_escapes_and_special_values() -> None:
    exp = parse_exposition(TEXT)
    values = exp.values()
    assert values[series_key("smg_worker_cb_state", {"worker": "http://127.0.0.1:2"})] == 1.0
    # NaN and ±Inf are read and not reported (a reader may count on finite values: issue 38 H4)
    assert series_key("odd", {"path": 'a"b\\c\nd', "x": "1"}) not in values
    assert series_key("nan_metric") not in values
    assert all(math.isfinite(v) for v in values.values())
    assert values[series_key("plain_total")] == 300.0
    assert exp.types == {"smg_worker_cb_state": "gauge", "odd": "counter"}


@pytest.mark.parametrize("line", ['a{b="x} 1', "a{b=x} 1", "just_a_name", 'a{b="x"} one'])
def test_a_bad_line_is_an_error_naming_the_line(line: str) -> None:
    with pytest.raises(MetricsError, match=r"decode/metrics: line 2"):
        parse_exposition(f"ok 1\n{line}\n", "decode/metrics")


def test_the_kind_comes_from_type_then_from_the_name() -> None:
    types = {"req": "counter", "lat": "histogram"}
    assert family_kind("req", (), types) == "counter"
    assert family_kind("lat_bucket", (("le", "1"),), types) == "histogram"
    assert family_kind("lat_sum", (), types) == "histogram"
    assert family_kind("x_total", (), {}) == "counter"
    assert family_kind("y_bucket", (("le", "1"),), {}) == "histogram"
    assert family_kind("running", (), {}) == "gauge"


def test_counter_deltas_count_a_reset_and_a_new_series_from_zero() -> None:
    before = parse_exposition("a_total 10\nb_total 50\ng 7\n")
    after = parse_exposition("a_total 25\nb_total 4\nc_total 2\ng 1\n")
    assert counter_deltas(before, after) == {
        series_key("a_total"): 15.0,
        series_key("b_total"): 4.0,  # the process restarted: 4 since the restart
        series_key("c_total"): 2.0,
    }


def test_bucket_quantile_interpolates_as_promql_does() -> None:
    buckets = [(0.1, 10.0), (0.2, 20.0), (math.inf, 20.0)]
    assert bucket_quantile(0.5, buckets) == pytest.approx(0.1)
    assert bucket_quantile(0.75, buckets) == pytest.approx(0.15)
    # above the highest finite bound: that bound (histogram_quantile's rule)
    assert bucket_quantile(0.99, [(0.1, 1.0), (math.inf, 10.0)]) == pytest.approx(0.1)
    assert bucket_quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]) is None
    assert bucket_quantile(0.5, [(0.1, 3.0)]) is None  # no +Inf bucket: not a histogram


def test_histogram_quantiles_are_the_runs_own() -> None:
    metrics = WorkerMetrics()
    for v in (0.15, 0.15, 0.15):
        metrics.ttft.observe(v)
    before = parse_exposition(metrics.render())
    for v in (3.0, 3.0, 3.0, 3.0):
        metrics.ttft.observe(v)
    after = parse_exposition(metrics.render())
    got = histogram_quantiles(before, after, "sglang:time_to_first_token_seconds", [0.5])
    ((labels, qs),) = got.items()
    assert labels == (("engine_type", "unified"), ("model_name", "sim"))  # SGLang's labels
    # only the run's four 3.0 s observations count: the median is inside the (2, 4] bucket
    assert qs[0.5] is not None and 2.0 < qs[0.5] <= 4.0


def test_gauge_series_keeps_every_point() -> None:
    scrapes = [
        (0.0, parse_exposition("g 1\n")),
        (1.0, Exposition()),
        (2.0, parse_exposition("g 3\n")),
    ]
    assert gauge_series(scrapes, "g") == {(): [(0.0, 1.0), (2.0, 3.0)]}


HOSTILE = """\
sglang:num_requests_total{m="a"} NaN
sglang:num_running_reqs{m="a"} +Inf
sglang:num_queue_reqs{m="a"} -Inf
sglang:num_running_reqs{m="b"} 3
"""


def test_no_parser_reports_a_sample_that_is_no_finite_number() -> None:
    """Issue 38 H4: every Prometheus text reader leaves NaN and ±Inf out (int() of one crashed
    verify, soak and case test)."""
    exp = parse_exposition(HOSTILE)
    assert [(s.name, s.value) for s in exp.samples] == [("sglang:num_running_reqs", 3.0)]
    assert parse_labeled(HOSTILE) == [("sglang:num_running_reqs", {"m": "b"}, 3.0)]
    assert parse_metrics(HOSTILE) == {"sglang:num_running_reqs": 3.0}


def test_a_count_that_is_nan_or_overflows_is_not_reported() -> None:
    big = 'sglang:num_requests_total{m="a"} 1e308\nsglang:num_requests_total{m="b"} 1e308\n'
    assert engine_count(HOSTILE) == 0  # the engine's series are there, its counter is not: 0
    assert engine_count(big) is None  # a sum past every float: no number
    assert decode_counts([HOSTILE, big]) is None
    assert engine_count("sglang:num_requests_total 7\n") == 7


def test_loads_and_summed_metrics_that_are_no_finite_number_are_not_reported() -> None:
    body = ('{"workers": [{"worker": "http://a", "load": NaN}, {"worker": "http://b", "load": '
            f'{"9" * 400}}}, {{"worker": "http://c", "load": 2}}]}}')  # fmt: skip
    assert parse_loads(body) == {"http://c": 2.0}
    assert parse_metrics("x 1e308\nx 1e308\ny 1\n") == {"y": 1.0}
