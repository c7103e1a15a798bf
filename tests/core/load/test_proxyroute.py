"""The path to a target, decided from the environment as httpx (the OpenAI SDK's client) does."""

from __future__ import annotations

import pytest

from servelab.core.load.proxyroute import ProxyPath, RouteSource, parse_proxy, route

ROUTER = "http://127.0.0.1:30001"


def test_nothing_set_goes_straight() -> None:
    got = route(ROUTER, {})
    assert got.path == ProxyPath.DIRECT and got.source == RouteSource.UNSET and got.proxy is None


def test_the_variable_of_the_targets_scheme_is_the_one_read() -> None:
    got = route(ROUTER, {"HTTP_PROXY": "127.0.0.1:3128", "HTTPS_PROXY": "http://other:1"})
    assert got.path == ProxyPath.FORWARD and got.proxy == "http://127.0.0.1:3128"
    assert (got.source, got.variable) == (RouteSource.ENV, "HTTP_PROXY")
    tls = route("https://router.example:443", {"HTTPS_PROXY": "http://p:8"})
    assert tls.proxy == "http://p:8" and tls.variable == "HTTPS_PROXY"
    # an http:// target is not sent through HTTPS_PROXY (httpx maps it to https:// only)
    assert route(ROUTER, {"HTTPS_PROXY": "http://p:8"}).path == ProxyPath.DIRECT


def test_lower_case_first_then_all_proxy() -> None:
    env = {"http_proxy": "http://low:1", "HTTP_PROXY": "http://up:2"}
    assert route(ROUTER, env).proxy == "http://low:1"
    got = route(ROUTER, {"ALL_PROXY": "http://all:3"})
    assert got.proxy == "http://all:3" and got.variable == "ALL_PROXY"


@pytest.mark.parametrize(
    ("no_proxy", "bypassed"),
    [
        ("*", True),
        ("127.0.0.1", True),
        ("localhost, 127.0.0.1", True),  # a host entry matches any port
        ("127.0.0.1:9", False),  # an entry with a port is that port only
        ("10.0.0.1", False),
        ("http://127.0.0.1", True),
        ("https://127.0.0.1", False),
        ("", False),
    ],
)
def test_no_proxy_names_hosts_as_httpx_matches_them(no_proxy: str, bypassed: bool) -> None:
    got = route(ROUTER, {"HTTP_PROXY": "http://p:1", "NO_PROXY": no_proxy})
    assert (got.path == ProxyPath.DIRECT) is bypassed
    if bypassed:
        assert got.source == RouteSource.NO_PROXY and got.variable == "NO_PROXY"


def test_domains_match_their_subdomains_not_lookalikes() -> None:
    env = {"HTTP_PROXY": "http://p:1", "no_proxy": ".example.com"}
    assert route("http://router.example.com:1", env).path == ProxyPath.DIRECT
    assert route("http://example.com:1", env).path == ProxyPath.DIRECT
    assert route("http://badexample.com:1", env).path == ProxyPath.FORWARD


def test_loopback_is_not_bypassed_by_itself() -> None:
    # httpx (unlike some clients) sends loopback through the proxy unless NO_PROXY names it
    assert route("http://localhost:8000", {"HTTP_PROXY": "http://p:1"}).forwarded


def test_the_flags_overrule_the_environment() -> None:
    env = {"HTTP_PROXY": "http://p:1", "NO_PROXY": "*"}
    flag = route(ROUTER, env, proxy="http://q:2")
    assert flag.proxy == "http://q:2" and flag.source == RouteSource.FLAG
    off = route(ROUTER, env, bypass=True)
    assert off.path == ProxyPath.DIRECT and off.source == RouteSource.BYPASS


@pytest.mark.parametrize("bad", ["socks5://p:1", "https://p:1", "http://", "http://p:1/path"])
def test_a_proxy_url_servelab_cannot_speak_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="forward proxy"):
        parse_proxy(bad)
    with pytest.raises(ValueError):
        route(ROUTER, {"HTTP_PROXY": bad})
