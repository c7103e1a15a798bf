"""The engine field of the spec and what it selects: the router's argv, the simulator's flag,
the router module the pre-flight checks, and the metric names soak reads (pure)."""

from __future__ import annotations

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB, DEFAULT_SPEC_TOML
from servelab.core.deploy.preflight import Requirement, requirements
from servelab.core.deploy.routers import router_description
from servelab.core.deploy.spec import parse_spec
from servelab.core.deploy.topology import router_argv, sim_argv
from servelab.core.engines import (
    SGLANG,
    SGLANG_KNOB,
    VLLM,
    VLLM_KNOB,
    WorkerCounts,
    canonical_metrics,
    engine,
    readiness_workers,
)
from servelab.errors import SpecError

VLLM_SPEC = (
    DEFAULT_SPEC_TOML.replace('name = "reference-pd-sim"', 'name = "vllm-pd-sim"\nengine = "vllm"')
    .replace(SGLANG_KNOB, VLLM_KNOB)
    .replace('kind = "smg", ', "")
)
#: The embedded default as a spec written before smg reads: no router kind.
SGLANG_ROUTER_SPEC = DEFAULT_SPEC_TOML.replace('kind = "smg", ', "")


def test_the_engine_defaults_to_sglang_and_unknown_engines_are_spec_errors() -> None:
    assert parse_spec(DEFAULT_SPEC_TOML).engine == "sglang"
    assert parse_spec(VLLM_SPEC).engine == "vllm"
    with pytest.raises(SpecError) as info:
        parse_spec(DEFAULT_SPEC_TOML.replace('state_dir = ".servelab"', 'engine = "trtllm"'))
    assert info.value.path == "engine"
    with pytest.raises(ValueError, match="unknown engine"):
        engine("trtllm")


def test_each_engine_is_described_once() -> None:
    assert engine("sglang") is SGLANG and engine("vllm") is VLLM
    assert SGLANG.knob == DEFAULT_KNOB and VLLM.knob == VLLM_KNOB
    assert router_description("sglang").package == "sglang-router==0.3.2"
    assert router_description("vllm").package == "vllm-router==0.1.17"
    assert router_description("sglang", "smg").package == "smg==1.13.0"
    assert SGLANG.router_ready_path == VLLM.router_ready_path == "/readiness"
    assert SGLANG.worker_ready_path == VLLM.worker_ready_path == "/health"
    # where each reports what it runs with: SGLang's older alias too, vLLM's in JSON
    assert SGLANG.report_paths == ("/server_info", "/get_server_info")
    assert VLLM.report_paths == ("/server_info?config_format=json",)
    assert SGLANG.router_all_healthy_path is None and VLLM.router_all_healthy_path == "/health"


def test_vllm_router_argv_is_pd_with_nixl_and_always_a_port() -> None:
    spec = parse_spec(VLLM_SPEC)
    assert router_argv(spec, "router", "py") == [
        "py", "-m", "vllm_router.launch_router",
        "--host", "127.0.0.1", "--port", "30001",
        "--vllm-pd-disaggregation",
        "--prefill", "http://127.0.0.1:30000",
        "--decode", "http://127.0.0.1:30002",
        "--kv-connector", "nixl",
        "--policy", "round_robin",
        "--worker-startup-check-interval", "1",
        "--prometheus-host", "127.0.0.1", "--prometheus-port", "29000",
        "--worker-startup-timeout-secs", "60",
        "--health-check-interval-secs", "2",
    ]  # fmt: skip


def test_sglang_router_argv_is_unchanged() -> None:
    argv = router_argv(parse_spec(SGLANG_ROUTER_SPEC), "router", "py")
    assert argv[:3] == ["py", "-m", "sglang_router.launch_router"]
    assert "--pd-disaggregation" in argv and "--kv-connector" not in argv
    assert argv[argv.index("--prefill") + 1 : argv.index("--prefill") + 3] == [
        "http://127.0.0.1:30000",
        "8998",
    ]


def test_sim_workers_of_a_vllm_spec_run_the_vllm_simulator() -> None:
    vllm, sglang = parse_spec(VLLM_SPEC), parse_spec(DEFAULT_SPEC_TOML)
    for role in ("prefill", "decode"):
        argv = sim_argv(vllm, role, "py")
        assert argv[argv.index("--engine") + 1] == "vllm"
        assert "--engine" not in sim_argv(sglang, role, "py")
    assert "--bootstrap-port" in sim_argv(vllm, "prefill", "py")  # its NIXL side channel


def test_the_preflight_checks_the_engines_router_module() -> None:
    vllm = parse_spec(VLLM_SPEC)
    assert requirements(vllm.service("router"), vllm.engine) == [
        Requirement("vllm_router.launch_router", "vllm-router==0.1.17")
    ]
    smg = parse_spec(DEFAULT_SPEC_TOML)
    assert requirements(smg.service("router"), smg.engine) == [
        Requirement("smg.launch_router", "smg==1.13.0")
    ]
    assert requirements(smg.service("router"))[0].pinned == ("smg", "1.13.0")
    assert requirements(vllm.service("decode"), vllm.engine) == []


def test_vllm_metric_names_become_the_names_the_rules_read() -> None:
    scrape = {"vllm:num_requests_running": 3.0, "vllm:generation_tokens_total": 9.0, "x": 1.0}
    assert canonical_metrics(scrape) == {
        "sglang:num_running_reqs": 3.0,
        "sglang:generation_tokens_total": 9.0,
        "x": 1.0,
    }
    sglang = {"sglang:num_running_reqs": 2.0}
    assert canonical_metrics(sglang) == sglang


def test_readiness_worker_counts_from_either_router() -> None:
    sglang = {"status": "ready", "healthy_workers": 2, "total_workers": 2}
    assert readiness_workers(sglang) == WorkerCounts(healthy=2, total=2)
    vllm = {"status": "ready", "prefill": {"healthy": 1, "total": 1},
            "decode": {"healthy": 1, "total": 2}}  # fmt: skip
    assert readiness_workers(vllm) == WorkerCounts(healthy=2, total=3)
    assert readiness_workers({"status": "ready"}) is None is readiness_workers("OK")
    partial = {"prefill": {"healthy": 1}, "decode": {"healthy": 1, "total": 1}}
    assert readiness_workers(partial) is None
