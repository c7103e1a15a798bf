"""``bench`` and ``verify``'s e2e probe take the agents' path: through the forward proxy
``--proxy`` or the proxy environment names (tinyproxy, Debian's package, as a plain process),
straight with ``--no-proxy``; each says which."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.bench.contract import BenchConfig
from servelab.core.ledger.codec import decode, encode
from servelab.core.load.proxyroute import ProxyPath, RouteSource, route
from servelab.core.verify.e2e import E2EProbe
from servelab.ops.verify.e2e import E2EOptions, e2e_check
from tests.support import run_cli
from tests.support.forward import ForwardProxy, running_tinyproxy
from tests.support.stack import SimStack, sim_stack

_NO_ENV = {name: "" for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy")}


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    with sim_stack(time_scale=0.05) as st:
        yield st


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[ForwardProxy]:
    with running_tinyproxy(tmp_path / "tinyproxy") as running:
        yield running


def _bench(st: SimStack, tmp: Path, *args: str, env: dict[str, str]) -> dict[str, object]:
    done = run_cli(
        "bench", "--url", st.router_url, "--requests", "3", "--model", "m", "--no-ledger",
        "--json", *args, cwd=tmp, env=_NO_ENV | env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    doc: dict[str, object] = json.loads(done.stdout)
    return doc


def test_bench_goes_through_the_environments_proxy_and_says_so(
    stack: SimStack, proxy: ForwardProxy, tmp_path: Path
) -> None:
    doc = _bench(stack, tmp_path, env={"http_proxy": proxy.url})
    assert doc["path"] == f"through the forward proxy {proxy.url} (from http_proxy)"
    config = doc["config"]
    assert isinstance(config, dict) and config["route"]["variable"] == "http_proxy"
    assert proxy.log.read_text().count(f"POST {stack.router_url}/v1/chat/completions") >= 3


def test_bench_no_proxy_goes_straight(stack: SimStack, proxy: ForwardProxy, tmp_path: Path) -> None:
    doc = _bench(stack, tmp_path, "--no-proxy", env={"HTTP_PROXY": proxy.url})
    assert doc["path"] == "straight (--no-proxy)"
    assert "POST" not in proxy.log.read_text()


def test_a_proxy_servelab_cannot_speak_is_a_usage_error(stack: SimStack, tmp_path: Path) -> None:
    done = run_cli("bench", "--url", stack.router_url, "--proxy", "socks5://127.0.0.1:1",
                   "--no-ledger", cwd=tmp_path, env=_NO_ENV)  # fmt: skip
    assert done.returncode == 2 and "forward proxy must be http://" in done.stderr
    assert "Invalid value for '--proxy'" in done.stderr
    bad_env = run_cli("bench", "--url", stack.router_url, "--no-ledger", cwd=tmp_path,
                      env=_NO_ENV | {"HTTP_PROXY": "socks5://127.0.0.1:1"})  # fmt: skip
    assert bad_env.returncode == 2 and "HTTP_PROXY" not in bad_env.stdout
    assert "forward proxy must be http://" in bad_env.stderr


def test_a_bench_config_with_its_route_reads_back_from_its_encoding() -> None:
    path = route("http://r:1", {"HTTP_PROXY": "http://u:secret@p:3128"})
    config = BenchConfig(url="http://r:1", route=path)
    stored = encode(config)
    assert "secret" not in json.dumps(stored)  # the password is never stored
    back = decode(BenchConfig, stored)
    assert back.route is not None and back.route.path == ProxyPath.FORWARD
    assert decode(BenchConfig, encode(BenchConfig(url="http://r:1"))).route is None


def test_verifys_e2e_probe_takes_the_proxy_and_records_the_path(
    stack: SimStack, proxy: ForwardProxy
) -> None:
    opts = E2EOptions(timeout_s=30, env={"HTTP_PROXY": proxy.url})
    check = asyncio.run(e2e_check("router", stack.router_url, [stack.decode_url], opts))
    assert check.ok and isinstance(check.data, E2EProbe)
    assert check.data.path is not None and check.data.path.source == RouteSource.ENV
    assert f"POST {stack.router_url}/v1/chat/completions" in proxy.log.read_text()
    straight = E2EOptions(timeout_s=30, no_proxy=True, env={"HTTP_PROXY": proxy.url})
    again = asyncio.run(e2e_check("router", stack.router_url, [stack.decode_url], straight))
    assert isinstance(again.data, E2EProbe) and again.data.path is not None
    assert again.data.path.source == RouteSource.BYPASS
