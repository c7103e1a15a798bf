"""The load target rule: --url wins, else the spec's entry point (proxy, else router)."""

from __future__ import annotations

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_SPEC_TOML
from servelab.core.deploy.spec import parse_spec
from servelab.core.deploy.target import LoadTarget, load_target
from servelab.errors import SpecError

ROUTER_ONLY = (
    'name = "t"\n\n[services.router]\nrole = "router"\nurl = "http://127.0.0.1:9"\nstart = "true"\n'
)
WITH_PROXY = (
    ROUTER_ONLY + '\n[services.proxy]\nrole = "proxy"\nurl = "http://127.0.0.1:8/"\n'
    'start = "true"\ndepends_on = ["router"]\n'
)


def test_without_url_the_entry_point_is_the_target() -> None:
    spec = parse_spec(ROUTER_ONLY)
    assert load_target(spec, None) == LoadTarget("http://127.0.0.1:9", entry_point=True)
    default = parse_spec(DEFAULT_SPEC_TOML)
    target = load_target(default, None)
    assert target.entry_point
    assert target.url == default.service(default.entry_point).url


def test_the_proxy_is_the_entry_point_when_there_is_one() -> None:
    assert load_target(parse_spec(WITH_PROXY), None).url == "http://127.0.0.1:8"


def test_url_overrides_and_says_whether_it_is_the_entry_point() -> None:
    spec = parse_spec(ROUTER_ONLY)
    assert load_target(spec, "http://127.0.0.1:7") == LoadTarget("http://127.0.0.1:7", False)
    assert load_target(spec, "http://127.0.0.1:9/").entry_point
    assert load_target(None, "http://h:1") == LoadTarget("http://h:1", entry_point=False)


def test_no_url_and_no_spec_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="nothing to load"):
        load_target(None, None)
