"""Start/stop/restart plans and the exact argv of sim workers and the real router."""

from __future__ import annotations

import pytest

from servelab.core.deploy import topology
from servelab.core.deploy.spec import DEFAULT_SPEC_TOML, DeploymentSpec, parse_spec
from servelab.core.deploy.topology import (
    dependents,
    down_plan,
    restart_plan,
    router_argv,
    service_argv,
    sim_argv,
    stop_order,
    up_plan,
)
from servelab.errors import SpecError

PROXY_SPEC = (
    DEFAULT_SPEC_TOML
    + """
[services.proxy]
role = "proxy"
url = "http://127.0.0.1:30010"
start = "sim"
args = ["--stall-reused-after", "3"]
depends_on = ["router"]

[services.web]
role = "generic"
url = "http://127.0.0.1:30020"
start = "python -m http.server 30020"
"""
)


@pytest.fixture
def spec() -> DeploymentSpec:
    return parse_spec(PROXY_SPEC)


def test_orders(spec: DeploymentSpec) -> None:
    assert stop_order(spec) == ["web", "proxy", "router", "decode", "prefill"]
    assert up_plan(spec, ["router"]) == ["prefill", "decode", "router"]
    assert up_plan(spec) == ["prefill", "decode", "router", "proxy", "web"]
    assert down_plan(spec, ["decode"]) == ["proxy", "router", "decode"]


def test_restart_plan_co_restarts_dependents(spec: DeploymentSpec) -> None:
    # the incident: restarting prefill restarts decode and the router after it
    assert restart_plan(spec, ["prefill"]) == ["prefill", "decode", "router", "proxy"]
    assert restart_plan(spec, ["decode"]) == ["decode", "router", "proxy"]
    assert restart_plan(spec, ["web"]) == ["web"]
    assert restart_plan(spec, ["router", "decode"]) == ["decode", "router", "proxy"]
    assert dependents(spec, ["router"]) == {"router", "proxy"}


def test_unknown_service_is_spec_error(spec: DeploymentSpec) -> None:
    with pytest.raises(SpecError, match="unknown service 'nope'"):
        restart_plan(spec, ["nope"])


def test_sim_argv(spec: DeploymentSpec) -> None:
    assert sim_argv(spec, "prefill", "/py") == [
        "/py",
        "-m",
        "servelab",
        "sim",
        "prefill",
        "--host",
        "127.0.0.1",
        "--port",
        "30000",
        "--bootstrap-port",
        "8998",
        "--enable-metrics",  # servelab reads SGLang's /metrics, served only with it
    ]
    assert sim_argv(spec, "decode", "/py")[4:] == [
        "decode",
        "--host",
        "127.0.0.1",
        "--port",
        "30002",
        "--enable-metrics",
    ]
    assert sim_argv(spec, "proxy", "/py")[4:] == [
        "proxy",
        "--host",
        "127.0.0.1",
        "--port",
        "30010",
        "--upstream",
        "http://127.0.0.1:30001",
        "--stall-reused-after",
        "3",
    ]


def test_router_argv(spec: DeploymentSpec) -> None:
    assert router_argv(spec, "router", "/py") == [
        "/py",
        "-m",
        "sglang_router.launch_router",
        "--host",
        "127.0.0.1",
        "--port",
        "30001",
        "--pd-disaggregation",
        "--prefill",
        "http://127.0.0.1:30000",
        "8998",
        "--decode",
        "http://127.0.0.1:30002",
        "--policy",
        "round_robin",
        "--prometheus-host",
        "127.0.0.1",
        "--prometheus-port",
        "29000",
        "--worker-startup-timeout-secs",
        "60",
        "--health-check-interval-secs",
        "2",
    ]


def test_router_argv_options_and_extra_args() -> None:
    text = DEFAULT_SPEC_TOML.replace(
        "health_check_interval_s = 2 }",
        "health_check_interval_s = 2, request_timeout_s = 600, "
        'extra_args = ["--disable-retries"] }',
    )
    argv = router_argv(parse_spec(text), "router", "/py")
    assert argv[-3:] == ["--request-timeout-secs", "600", "--disable-retries"]


def test_service_argv_kinds(spec: DeploymentSpec) -> None:
    assert service_argv(spec, "web", "/py") is None
    assert (service_argv(spec, "router", "/py") or [])[2] == "sglang_router.launch_router"
    with pytest.raises(SpecError):
        sim_argv(spec, "router", "/py")
    with pytest.raises(SpecError):
        router_argv(spec, "decode", "/py")


def test_public_api() -> None:
    for name in topology.__all__:
        assert hasattr(topology, name)
