"""The path a command took, worded: the soak's header line and ``--json``, bench's caption."""

from __future__ import annotations

import json

from servelab.core.load.proxyroute import ProxyRoute, route
from servelab.core.soak.result import SoakConfig, SoakResult, Targets
from servelab.report.route import route_text
from servelab.report.soak.soak import render_soak, soak_json

ROUTER = "http://127.0.0.1:30001"


def test_each_source_is_said() -> None:
    env = {"HTTPS_PROXY": "http://u:pw-secret@p:3128", "NO_PROXY": "10.0.0.1"}
    tls = route("https://r.example", env)
    assert route_text(tls) == "through the forward proxy http://u:***@p:3128 (from HTTPS_PROXY)"
    assert route_text(route(ROUTER, {}, proxy="http://p:1")) == (
        "through the forward proxy http://p:1 (--proxy)"
    )
    assert route_text(route(ROUTER, {}, bypass=True)) == "straight (--no-proxy)"
    skipped = route("http://10.0.0.1:1", {"http_proxy": "http://p:1", "no_proxy": "10.0.0.1"})
    assert route_text(skipped) == "straight (no_proxy names the host)"
    assert route_text(ProxyRoute()) == "straight (no proxy variable set for its scheme)"


def test_the_soak_says_its_path_in_text_and_json() -> None:
    path = route(ROUTER, {"HTTP_PROXY": "http://127.0.0.1:3128"})
    result = SoakResult(SoakConfig(), Targets(ROUTER, ROUTER, route=path))
    assert "  path: through the forward proxy http://127.0.0.1:3128 (from HTTP_PROXY)\n" in (
        render_soak(result)
    )
    doc = json.loads(soak_json(result))
    assert doc["targets"]["route"] == {
        "path": "forward_proxy", "source": "env", "proxy": "http://127.0.0.1:3128",
        "variable": "HTTP_PROXY",
        "text": "through the forward proxy http://127.0.0.1:3128 (from HTTP_PROXY)",
    }  # fmt: skip
    assert result.targets.via_proxy and result.targets.proxy == "http://127.0.0.1:3128"
    straight = SoakResult(SoakConfig(), Targets(ROUTER, ROUTER))
    assert not straight.targets.via_proxy and straight.targets.proxy is None
