"""Counting a worker's requests by real counters: its own, else the router's per worker (pure).

The series are as the engines and the pinned routers expose them (``tests/contracts/``; the
router lines as sglang-router 0.3.2 and vllm-router 0.1.17 printed them after one request)."""

from __future__ import annotations

from servelab.core.telemetry.promtext import Exposition, parse_exposition
from servelab.core.verify.served import Count, Gap, Scrapes, Signal, counted, engine_served

URL = "http://127.0.0.1:31102"
OTHER = "http://127.0.0.1:31103"


def _sglang(n: int) -> Exposition:
    return parse_exposition(
        f'sglang:num_requests_total{{model_name="m",engine_type="decode"}} {n}.0\n'
        'sglang:num_running_reqs{model_name="m",engine_type="decode",tp_rank="0"} 0\n'
    )


def _smg(n: int) -> Exposition:
    return parse_exposition(
        f'smg_worker_cb_outcomes_total{{worker="{URL}",outcome="success"}} {n}\n'
        f'smg_worker_cb_outcomes_total{{worker="{URL}",outcome="failure"}} 5\n'
        f'smg_worker_cb_outcomes_total{{worker="{OTHER}",outcome="success"}} 9\n'
        f'smg_worker_health{{worker="{URL}"}} 1\n'
    )


def _vllm_router(n: int) -> Exposition:
    return parse_exposition(
        f'vllm_router_processed_requests_total{{worker="{URL}"}} {n}\n'
        f'vllm_router_worker_health{{worker="{OTHER}"}} 1\n'
    )


def test_the_engines_own_counter_comes_first() -> None:
    got = counted(URL, Scrapes(_sglang(2), _smg(0)), Scrapes(_sglang(3), _smg(7)))
    assert got == Count(Signal.ENGINE, "sglang:num_requests_total", 2, 3) and got.grew
    vllm = parse_exposition(
        'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 4\n'
        'vllm:request_success_total{engine="0",finished_reason="abort",model_name="m"} 1\n'
    )
    assert engine_served(vllm) == ("vllm:request_success_total", 5)
    assert engine_served(None) is None


def test_without_engine_metrics_the_routers_per_worker_counter_counts() -> None:
    # SGLang without --enable-metrics: /metrics 404 (None); the router counts its successes
    got = counted(URL, Scrapes(None, _smg(1)), Scrapes(None, _smg(4)))
    assert got == Count(Signal.ROUTER, "smg_worker_cb_outcomes_total", 1, 4)
    # a series the router has not observed yet is 0, not unknown
    fresh = parse_exposition(f'smg_worker_health{{worker="{URL}"}} 1\n')
    assert counted(URL + "/", Scrapes(None, fresh), Scrapes(None, _smg(1))) == Count(
        Signal.ROUTER, "smg_worker_cb_outcomes_total", 0, 1
    )
    # vLLM with --disable-log-stats: /metrics answers without vllm: series
    bare = parse_exposition("process_cpu_seconds_total 1\n")
    got = counted(URL, Scrapes(bare, _vllm_router(0)), Scrapes(bare, _vllm_router(2)))
    assert got == Count(Signal.ROUTER, "vllm_router_processed_requests_total", 0, 2)


def test_a_worker_no_real_counter_counts_is_a_gap_with_its_reason() -> None:
    assert counted(URL, Scrapes(None, None), Scrapes(None, None)) is Gap.NO_METRICS
    bare = parse_exposition("process_cpu_seconds_total 1\n")
    assert counted(URL, Scrapes(bare, None), Scrapes(bare, None)) is Gap.NO_ENGINE_SERIES
    # one moment without the engine's counter: the same signal is needed before and after
    assert counted(URL, Scrapes(None, None), Scrapes(_sglang(1), None)) is Gap.NO_METRICS
