"""The router's own Prometheus metrics and loads, parsed; no answer is unknown, never healthy."""

from __future__ import annotations

import servelab.core.telemetry.router as rm_mod
from servelab.core.telemetry.router import (
    parse_labeled,
    parse_loads,
    router_metrics,
    routing_policy,
)

TEXT = """# TYPE smg_worker_cb_state gauge
smg_worker_cb_state{worker="http://127.0.0.1:1"} 0
smg_worker_cb_state{worker="http://127.0.0.1:2"} 1
smg_worker_health{worker="http://127.0.0.1:1"} 1
smg_worker_health{worker="http://127.0.0.1:2"} 0
smg_http_inflight_request_age_count{gt="30",le="60"} 2
smg_router_request_errors_total{error_type="decode_unavailable"} 3
smg_router_request_errors_total{error_type="decode_unavailable"} 1
junk{a="b"} not-a-number
"""


def test_public_api_is_explicit() -> None:
    for name in rm_mod.__all__:
        assert hasattr(rm_mod, name), name


def test_per_worker_breaker_health_inflight_and_errors() -> None:
    m = router_metrics(TEXT)
    assert m.known and m.open_circuits == ["http://127.0.0.1:2"]
    assert m.unhealthy == ["http://127.0.0.1:2"]
    assert m.inflight == 2 and m.errors == {"decode_unavailable": 4}
    assert parse_labeled('a{x="1",y="2"} 3')[0] == ("a", {"x": "1", "y": "2"}, 3.0)


def test_a_source_that_does_not_answer_is_unknown() -> None:
    assert router_metrics(None).known is False
    assert router_metrics(None).open_circuits == []
    assert parse_loads(None) is None
    assert parse_loads('{"workers":[{"worker":"http://h:1/","load":2}]}') == {"http://h:1": 2.0}


def test_the_routing_policy_is_the_selection_counters_label() -> None:
    """sglang-router 0.3.2 labels each worker pick with its policy (as scraped from it)."""
    text = (
        "# TYPE smg_worker_selection_total counter\n"
        'smg_worker_selection_total{worker_type="prefill",connection_mode="http",'
        'model="servelab-sim",policy="cache_aware"} 146\n'
        'smg_worker_selection_total{worker_type="decode",connection_mode="http",'
        'model="servelab-sim",policy="round_robin"} 146\n'
    )
    assert routing_policy(text, "prefill") == "cache_aware"
    assert routing_policy(text, "decode") == "round_robin"
    assert routing_policy(text) is None  # two policies: --policy alone does not say which
    assert routing_policy(text.replace("round_robin", "cache_aware")) == "cache_aware"
    assert routing_policy("smg_worker_health 1\n") is None  # nothing routed yet: unknown


def test_smg_loads_are_summed_per_worker_over_its_ranks() -> None:
    """smg 1.13's ``/get_loads`` (as it answered, trimmed): one item per data-parallel rank."""
    body = (
        '{"timestamp":"t","version":"smg-1.13.0","dp_rank_count":3,"loads":['
        '{"worker":"http://127.0.0.1:2","worker_type":"decode","dp_rank":0,"num_running_reqs":3,'
        '"num_waiting_reqs":1},'
        '{"worker":"http://127.0.0.1:2","worker_type":"decode","dp_rank":1,"num_running_reqs":2},'
        '{"worker":"http://127.0.0.1:1/","worker_type":"prefill","dp_rank":0,'
        '"num_running_reqs":0},'
        '{"worker":"http://127.0.0.1:3","worker_type":"prefill","num_running_reqs":true}],'
        '"aggregate":{"total_running_reqs":5}}'
    )
    assert parse_loads(body) == {"http://127.0.0.1:2": 5.0, "http://127.0.0.1:1": 0.0}
    assert parse_loads("[]") == {} and parse_loads("not json") is None


def test_smg_pd_latencies_are_the_histograms_means() -> None:
    text = TEXT + (
        'smg_pd_ttft_seconds_sum{backend_type="pd",model="m",runtime="sglang"} 1.5\n'
        'smg_pd_ttft_seconds_count{backend_type="pd",model="m",runtime="sglang"} 3\n'
        'smg_pd_prefill_duration_seconds_sum{backend_type="pd",model="m"} 0.2\n'
        'smg_pd_prefill_duration_seconds_count{backend_type="pd",model="m"} 4\n'
    )
    m = router_metrics(text)
    assert m.pd_ttft_s == 0.5 and m.pd_prefill_s == 0.05
    assert router_metrics(TEXT).pd_ttft_s is None  # sglang-router 0.3.2: none in HTTP PD mode
