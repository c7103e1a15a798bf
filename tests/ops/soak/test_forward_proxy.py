"""``servelab soak`` takes the agents' path: through the forward proxy their environment names.

tinyproxy (Debian's package, a plain process) is the forward proxy, set by ``HTTP_PROXY`` in the
soak's environment as the OpenAI SDK reads it (loopback is ``http://``, so ``HTTP_PROXY`` is the
variable httpx reads for it; ``HTTPS_PROXY`` names the proxy for ``https://`` targets). Its
``Timeout 1`` drops a request whose answer sends no byte for a second: a long uncached prefill
(the slow stack, no prefix cache) is cut, a short one is not. The soak localizes the proxy and
nothing else; ``--no-proxy`` bypasses it, and the path each took is said.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from servelab.core.load.proxyroute import route
from servelab.core.soak.result import SoakConfig
from servelab.ops.soak.soak import soak
from servelab.report.soak.soak import render_soak
from servelab.sim.settings import ENV_WARMUP_S
from tests.support import run_cli
from tests.support.forward import (
    FORWARD_SOAK,
    NO_ENV_PROXY,
    ForwardProxy,
    running_tinyproxy,
    slow_prefill_stack,
)
from tests.support.proxies import STACK_SCALES
from tests.support.soak import soak_targets
from tests.support.stack import SimStack, sim_stack

_SOAK = FORWARD_SOAK


@pytest.fixture(scope="module")
def slow() -> Iterator[SimStack]:
    with slow_prefill_stack() as st:
        yield st


@pytest.fixture
def dropping(tmp_path: Path) -> Iterator[ForwardProxy]:
    with running_tinyproxy(tmp_path / "tinyproxy", timeout_s=1) as proxy:
        yield proxy


def _soak(st: SimStack, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "soak", "--url", st.router_url, *_SOAK, *args, env=NO_ENV_PROXY | env, timeout=180
    )


def test_a_forward_proxy_from_the_environment_that_drops_long_requests_is_localized(
    slow: SimStack, dropping: ForwardProxy
) -> None:
    done = _soak(slow, env={"HTTP_PROXY": dropping.url})
    assert done.returncode == 1, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    route = doc["targets"]["route"]
    assert route["path"] == "forward_proxy" and route["variable"] == "HTTP_PROXY"
    assert route["proxy"] == dropping.url and "from HTTP_PROXY" in route["text"]
    assert [f["layer"] for f in doc["findings"]] == ["client_proxy"], doc["findings"]
    located = [loc["matrix"]["located"] for loc in doc["localizations"]]
    assert {loc["layer"] for loc in located if loc["layer"]} == {"client_proxy"}
    # the sessions went through the proxy; the router's replay hop went straight
    assert "POST " + slow.router_url + "/v1/chat/completions" in dropping.log.read_text()
    cells = [c for loc in doc["localizations"] for c in loc["matrix"]["cells"]]
    assert any(c["hop"] == "router" and c["outcome"] == "ok" for c in cells)
    assert any(c["hop"] == "entry_fresh" and c["outcome"] != "ok" for c in cells)


def test_no_proxy_bypasses_the_environments_proxy_and_says_so(
    slow: SimStack, dropping: ForwardProxy
) -> None:
    done = _soak(slow, "--no-proxy", "--no-localize", env={"HTTP_PROXY": dropping.url})
    assert done.returncode == 0, done.stdout[-3000:]
    doc = json.loads(done.stdout)
    assert doc["targets"]["route"]["path"] == "direct"
    assert doc["targets"]["route"]["text"] == "straight (--no-proxy)"
    assert "/v1/chat/completions" not in dropping.log.read_text()


@pytest.fixture(scope="module")
def fast() -> Iterator[SimStack]:
    with sim_stack(time_scale=STACK_SCALES["fast"], env={ENV_WARMUP_S: "0"}) as st:
        yield st


def test_a_forward_proxys_pool_smaller_than_the_agents_connections_is_the_proxy_under_load(
    fast: SimStack, tmp_path: Path
) -> None:
    # tinyproxy with one worker: four agents' heads wait in its queue behind 2-second answers,
    # past the idle timeout; one at a time (or straight to the router) every request passes
    targets = soak_targets(fast)
    config = SoakConfig(sessions=4, rounds=3, idle_timeout_s=3.0, duration_s=90.0, max_tokens=200)
    with running_tinyproxy(tmp_path / "pool", max_clients=1) as proxy:
        path = route(targets.entry_url, {"HTTPS_PROXY": proxy.url, "HTTP_PROXY": proxy.url})
        result = asyncio.run(soak(config, replace(targets, route=path)))
    # the proxy alone, every time; that it depends on the load is located in 1 of 3 runs only
    # (benchmarks/forward_proxy.py; why the others locate no load is not examined yet)
    assert [f.layer.value for f in result.findings] == ["client_proxy"], render_soak(result)
    located = {loc.matrix.located.layer for loc in result.localizations}
    assert located - {None} == {"client_proxy"}, render_soak(result)
