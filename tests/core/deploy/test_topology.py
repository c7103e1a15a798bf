"""Start/stop/restart plans and the exact argv of sim workers and the real router."""

from __future__ import annotations

import posixpath

import pytest

from servelab.core.deploy import topology
from servelab.core.deploy.defaultspec import DEFAULT_SPEC_TOML
from servelab.core.deploy.routers import ROUTERS
from servelab.core.deploy.spec import DeploymentSpec, parse_spec
from servelab.core.deploy.topology import (
    dependents,
    down_plan,
    restart_plan,
    router_argv,
    service_argv,
    sim_argv,
    started_behind,
    stop_order,
    up_plan,
)
from servelab.errors import SpecError

ROUTER_MODULES = {str(kind): router.module for kind, router in ROUTERS.items()}

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


def test_up_restarts_what_runs_behind_a_service_it_started(spec: DeploymentSpec) -> None:
    # the one restart rule, for ``up``: a router found running behind a decode this ``up``
    # started is restarted after it (its circuits were open), as ``restart decode`` does
    assert started_behind(spec, "router", ["decode"]) == ("decode",)
    assert started_behind(spec, "router", ["decode", "prefill"]) == ("prefill", "decode")
    assert started_behind(spec, "proxy", ["decode"]) == ("decode",)  # transitively
    assert started_behind(spec, "decode", ["prefill"]) == ("prefill",)
    assert started_behind(spec, "router", []) == ()
    assert started_behind(spec, "prefill", ["decode", "router"]) == ()  # dependents: no
    assert started_behind(spec, "web", ["prefill", "decode"]) == ()
    assert started_behind(spec, "router", ["router"]) == ()  # itself: no


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
    """The embedded default's router, smg: its startup probe interval given (its own is 30 s)."""
    assert router_argv(spec, "router", "/py") == [
        "/py",
        "-m",
        "smg.launch_router",
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
        "--worker-startup-check-interval",
        "1",
        "--prometheus-host",
        "127.0.0.1",
        "--prometheus-port",
        "29000",
        "--worker-startup-timeout-secs",
        "60",
        "--health-check-interval-secs",
        "2",
    ]


def test_a_spec_that_names_no_router_kind_keeps_sglang_router() -> None:
    text = DEFAULT_SPEC_TOML.replace('kind = "smg", ', "")
    argv = router_argv(parse_spec(text), "router", "/py")
    assert argv[2] == "sglang_router.launch_router" == ROUTER_MODULES["sglang-router"]
    assert "--worker-startup-check-interval" not in argv  # 0.3.2's argv as it always was
    pinned = text.replace("{ prometheus", '{ kind = "sglang-router", version = "0.3.2", prometheus')
    assert router_argv(parse_spec(pinned), "router", "/py") == argv


def test_router_argv_policies_and_health_options() -> None:
    text = DEFAULT_SPEC_TOML.replace(
        "health_check_interval_s = 2 }",
        'health_check_interval_s = 2, prefill_policy = "cache_aware", decode_policy = '
        '"power_of_two", health_failure_threshold = 2, health_success_threshold = 1 }',
    )
    argv = router_argv(parse_spec(text), "router", "/py")
    at = argv.index("--policy")
    assert argv[at : at + 6] == ["--policy", "round_robin", "--prefill-policy", "cache_aware",
                                 "--decode-policy", "power_of_two"]  # fmt: skip
    assert argv[-4:] == ["--health-failure-threshold", "2", "--health-success-threshold", "1"]


def test_a_router_kind_for_another_engine_or_version_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match=r"router\.kind: vllm-router drives vllm workers"):
        parse_spec(DEFAULT_SPEC_TOML.replace('kind = "smg"', 'kind = "vllm-router"'))
    with pytest.raises(SpecError, match=r"router\.version: servelab runs smg 1\.13\.0"):
        parse_spec(DEFAULT_SPEC_TOML.replace('kind = "smg"', 'kind = "smg", version = "1.14.0"'))
    with pytest.raises(SpecError, match=r"router\.kind"):
        parse_spec(DEFAULT_SPEC_TOML.replace('kind = "smg"', 'kind = "nginx"'))


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
    assert (service_argv(spec, "router", "/py") or [])[2] == "smg.launch_router"
    with pytest.raises(SpecError):
        sim_argv(spec, "router", "/py")
    with pytest.raises(SpecError):
        router_argv(spec, "decode", "/py")


def test_public_api() -> None:
    for name in topology.__all__:
        assert hasattr(topology, name)


SHARED_SPEC = (
    DEFAULT_SPEC_TOML
    + """
[services.decode2]
role = "decode"
url = "http://127.0.0.1:30011"
start = "sim"
env_file = "./.servelab/env/../env/decode.env"
depends_on = ["prefill"]

[services.decode3]
role = "decode"
url = "http://127.0.0.1:30012"
host = "gpu2"
start = "sim"
env_file = ".servelab/env/decode.env"

[hosts.gpu2]
ssh = "me@gpu2"
"""
)


def test_restart_plan_restarts_every_reader_of_a_shared_file() -> None:
    # two decode replicas share one env file: a change to it changes both, so restarting one
    # restarts the other (never one left running the file's old value); the same path on
    # another host is another file
    spec = parse_spec(SHARED_SPEC)
    assert restart_plan(spec, ["decode"]) == ["decode", "router", "decode2"]
    assert restart_plan(spec, ["decode2"]) == ["decode", "router", "decode2"]
    assert topology.file_sharers(spec, ["decode"]) == {"decode", "decode2"}
    assert restart_plan(spec, ["decode3"]) == ["decode3"]
    assert restart_plan(spec, ["prefill"]) == ["prefill", "decode", "router", "decode2"]


LINKED_SPEC = (
    DEFAULT_SPEC_TOML
    + """
[services.decode2]
role = "decode"
url = "http://127.0.0.1:30011"
start = "sim"
env_file = "env/decode-2.env"
depends_on = ["prefill"]

[services.decode3]
role = "decode"
url = "http://127.0.0.1:30012"
host = "gpu2"
start = "sim"
env_file = ".servelab/env/decode.env"

[hosts.gpu2]
ssh = "me@gpu2"
"""
)


def test_the_sharing_rule_compares_the_files_identities() -> None:
    # decode's and decode2's env files are two paths linked to one file (a symlink or a hard
    # link: one device and inode on the host): one file, so restarting one restarts the other;
    # the same identity on another host is another file; without identities, paths as written
    spec = parse_spec(LINKED_SPEC)
    decode_env = spec.services["decode"].env_file
    assert decode_env is not None and decode_env != "env/decode-2.env"
    one_file = (2049, 1234)
    same = {
        ("local", posixpath.normpath(decode_env)): one_file,
        ("local", "env/decode-2.env"): one_file,
        ("gpu2", ".servelab/env/decode.env"): one_file,
    }
    assert topology.file_sharers(spec, ["decode"], same) == {"decode", "decode2"}
    assert restart_plan(spec, ["decode2"], same) == ["decode", "router", "decode2"]
    assert restart_plan(spec, ["decode3"], same) == ["decode3"]
    assert topology.file_sharers(spec, ["decode"]) == {"decode"}
    assert restart_plan(spec, ["decode2"]) == ["decode2"]
    other = {**same, ("local", "env/decode-2.env"): (2049, 99)}  # two files: apart
    assert topology.file_sharers(spec, ["decode"], other) == {"decode"}
