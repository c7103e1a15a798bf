"""The rolling-restart plan and the worker documents it reads (pure)."""

from __future__ import annotations

import pytest

from servelab.core.deploy.rolling import (
    RollPhase,
    RollTarget,
    rolling_plan,
    router_kind,
    running_requests,
)
from servelab.core.deploy.spec import DeploymentSpec, parse_spec
from servelab.core.verify.served import engine_count
from servelab.errors import SpecError
from tests.support import REPO
from tests.support.xpyd import EXAMPLE_2P2D


def _spec() -> DeploymentSpec:
    return parse_spec(EXAMPLE_2P2D.read_text(), source="2p2d.toml")


def test_a_role_expands_to_its_workers_in_spec_order() -> None:
    plan = rolling_plan(_spec(), ["decode"])
    assert plan == [
        RollTarget("decode-1", "decode", "http://127.0.0.1:31102"),
        RollTarget("decode-2", "decode", "http://127.0.0.1:31103"),
    ]
    prefills = rolling_plan(_spec(), ["prefill-2", "prefill"])
    assert [(t.service, t.bootstrap_port) for t in prefills] == [
        ("prefill-1", 31198),
        ("prefill-2", 31199),
    ]
    assert [t.service for t in rolling_plan(_spec(), ["decode-2", "prefill-1"])] == [
        "prefill-1",
        "decode-2",
    ]


def test_the_router_and_unknown_names_cannot_roll() -> None:
    with pytest.raises(SpecError, match="router is a router: only prefill and decode"):
        rolling_plan(_spec(), ["router"])
    with pytest.raises(SpecError, match="unknown service 'nope'"):
        rolling_plan(_spec(), ["nope"])
    with pytest.raises(SpecError, match="at least one role or service"):
        rolling_plan(_spec(), [])


def test_a_role_with_one_worker_cannot_roll() -> None:
    spec = parse_spec((REPO / "examples" / "local-sim.toml").read_text())
    with pytest.raises(SpecError, match=r"at least two decode workers .* has 1"):
        rolling_plan(spec, ["decode"])
    with pytest.raises(SpecError, match=r"at least two prefill workers .* has 1"):
        rolling_plan(spec, ["prefill"])


def test_the_router_kind_is_sglang_router_until_the_spec_names_another() -> None:
    assert router_kind(_spec()) == "sglang-router"


def test_load_and_served_documents() -> None:
    assert running_requests([{"dp_rank": 0, "num_reqs": 3}, {"dp_rank": 1, "num_reqs": 2}]) == 5
    assert running_requests({"num_reqs": 0}) == 0
    assert running_requests(None) is None
    assert running_requests([{"num_reqs": "3"}]) is None
    assert running_requests([]) is None
    assert running_requests({"load": 4}) == 4  # what a vLLM worker answers
    assert running_requests({"load": "4"}) is None
    # the routed phase reads the worker's own counter of finished requests
    assert engine_count('sglang:num_requests_total{model_name="m"} 7.0\n') == 7
    assert engine_count("other_total 3\n") is None  # none of the engine's series
    assert engine_count("not { metrics") is None
    assert tuple(RollPhase) == ("remove", "drain", "restart", "verify", "add", "routed")
