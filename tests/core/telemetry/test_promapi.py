"""core/telemetry/promapi.py: a Prometheus API answer read once, its faults named by field."""

from __future__ import annotations

import math

import pytest

from servelab.core.telemetry.promapi import PromSeries, read_metadata, read_series
from servelab.errors import MetricsError


def test_a_vector_and_a_matrix_read_as_series_without_prometheus_own_labels() -> None:
    metric = {"__name__": "sglang:num_running_reqs", "job": "j", "instance": "i", "tp": "0"}
    vector = {"resultType": "vector", "result": [{"metric": metric, "value": [10.5, "3"]}]}
    assert read_series(vector, "/api/v1/query") == (
        PromSeries("sglang:num_running_reqs", (("tp", "0"),), ((10.5, 3.0),)),
    )
    matrix = {"result": [{"metric": metric, "values": [[1, "NaN"], [2, "+Inf"], [3, "4"]]}]}
    (series,) = read_series(matrix, "/api/v1/query_range")
    assert math.isnan(series.points[0][1]) and series.points[1][1] == math.inf
    assert series.points[2] == (3.0, 4.0)
    assert read_series(None, "/api/v1/query") == ()


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ([], "data is not an object"),
        ({"result": {"a": 1}}, "data.result is not a list"),
        ({"result": [{"metric": {}, "value": [1]}]}, "data.result[0].value"),
        ({"result": [{}, {"metric": [], "value": [1, "2"]}]}, "data.result[1].metric"),
        ({"result": [{"values": [[1, "2"], [2, "x"]]}]}, "data.result[0].values[1]"),
    ],
)
def test_a_misshapen_answer_is_one_error_naming_the_field(data: object, named: str) -> None:
    with pytest.raises(MetricsError, match=r"^Prometheus /api/v1/query: ") as caught:
        read_series(data, "/api/v1/query")
    assert named in str(caught.value)


def test_metadata_gives_each_family_its_first_type() -> None:
    data = {"a_total": [{"type": "counter", "help": "h"}], "b": [], "c": ["?"]}
    assert read_metadata(data, "/api/v1/metadata") == {"a_total": "counter", "c": ""}
    with pytest.raises(MetricsError, match=r"data\.a is not a list"):
        read_metadata({"a": {}}, "/api/v1/metadata")
