"""The pre-flight rules: which ports a service binds, what it needs, which facts are problems."""

from __future__ import annotations

from servelab.core.deploy import preflight
from servelab.core.deploy.defaultspec import DEFAULT_SPEC_TOML
from servelab.core.deploy.preflight import (
    PROBLEM_ENV,
    PROBLEM_ENV_UNREADABLE,
    PROBLEM_MODULE,
    PROBLEM_PORT,
    ROUTER_PACKAGE,
    PortClaim,
    PortState,
    Requirement,
    ServiceFacts,
    bound_ports,
    problems,
    requirements,
)
from servelab.core.deploy.spec import parse_spec
from servelab.core.deploy.topology import ROUTER_MODULE

SPEC = parse_spec(DEFAULT_SPEC_TOML)


def test_bound_ports_of_the_reference_topology() -> None:
    assert bound_ports(SPEC.service("prefill")) == [
        PortClaim("url", 30000),
        PortClaim("bootstrap_port", 8998),
    ]
    assert bound_ports(SPEC.service("decode")) == [PortClaim("url", 30002)]
    router = bound_ports(SPEC.service("router"))
    assert router[0] == PortClaim("url", 30001)
    assert [claim.field for claim in router] == ["url", "router.prometheus_port"]


def test_only_the_router_needs_a_module() -> None:
    assert requirements(SPEC.service("router")) == [Requirement(ROUTER_MODULE, ROUTER_PACKAGE)]
    assert requirements(SPEC.service("decode")) == []
    assert ROUTER_PACKAGE == "smg==1.13.0"  # the embedded default's router
    no_kind = parse_spec(DEFAULT_SPEC_TOML.replace('kind = "smg", ', ""))
    assert requirements(no_kind.service("router")) == [
        Requirement("sglang_router.launch_router", "sglang-router==0.3.2")
    ]


def test_problems_in_order_and_own_ports_are_fine() -> None:
    url, metrics = PortClaim("url", 1), PortClaim("router.prometheus_port", 2)
    facts = [
        ServiceFacts("prefill", "local", ports=(PortState(url, None),)),
        ServiceFacts("decode", "local", env_error="decode.env:3: not a NAME=VALUE line"),
        ServiceFacts("mine", "local", ports=(PortState(url, 42, own=True),)),
        ServiceFacts("cold", "local", env_unreadable="cannot read its env file"),
        ServiceFacts(
            "router",
            "gpu",
            ports=(PortState(url, None), PortState(metrics, 77)),
            missing=(Requirement(ROUTER_MODULE, ROUTER_PACKAGE),),
        ),
    ]
    found = problems(facts)
    assert [(p.service, p.kind) for p in found] == [
        ("decode", PROBLEM_ENV),
        ("cold", PROBLEM_ENV_UNREADABLE),
        ("router", PROBLEM_PORT),
        ("router", PROBLEM_MODULE),
    ]
    assert found[2].port == PortState(metrics, 77) and found[2].host == "gpu"
    assert found[3].need == Requirement(ROUTER_MODULE, ROUTER_PACKAGE)
    assert problems(facts[:1]) == []


def test_public_api() -> None:
    for name in preflight.__all__:
        assert hasattr(preflight, name)
