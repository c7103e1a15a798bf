"""``servelab soak`` to an ``https://`` router through the forward proxy ``HTTPS_PROXY`` names.

The agents' path of the incident, over TLS: nginx (Debian's package, a plain process) serves the
router over ``https://`` with a self-signed certificate made here, transparently (no buffering,
long timeouts); the soak trusts it through ``SSL_CERT_FILE``, as Python's default context and the
OpenAI SDK do. tinyproxy, set by ``HTTPS_PROXY``, carries each request in a ``CONNECT`` tunnel;
its ``Timeout 1`` drops a tunnel that carries no byte for a second, so a long uncached prefill
(the slow stack, fresh long context) is cut and a short one is not. The soak localizes the proxy
and nothing else; ``--no-proxy`` goes straight to the TLS front and passes.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import run_cli
from tests.support.forward import (
    FORWARD_SOAK,
    NO_ENV_PROXY,
    ForwardProxy,
    running_tinyproxy,
    slow_prefill_stack,
)
from tests.support.stack import SimStack
from tests.support.tlsfront import TlsFront, running_tls_front

#: the HTTP_PROXY test's workload (tests/ops/soak/test_forward_proxy.py)
_SOAK = FORWARD_SOAK


@pytest.fixture(scope="module")
def slow() -> Iterator[SimStack]:
    with slow_prefill_stack() as st:
        yield st


@pytest.fixture(scope="module")
def front(slow: SimStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsFront]:
    with running_tls_front(tmp_path_factory.mktemp("tls"), slow.router_url) as tls:
        yield tls


@pytest.fixture
def dropping(tmp_path: Path) -> Iterator[ForwardProxy]:
    with running_tinyproxy(tmp_path / "tinyproxy", timeout_s=1) as proxy:
        yield proxy


def _soak(front: TlsFront, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    trust = {"SSL_CERT_FILE": str(front.cert)}
    return run_cli("soak", "--url", front.url, *_SOAK, *args, env=NO_ENV_PROXY | trust | env,
                   timeout=180)  # fmt: skip


def test_an_https_proxy_from_the_environment_that_drops_long_requests_is_localized(
    front: TlsFront, dropping: ForwardProxy
) -> None:
    done = _soak(front, env={"HTTPS_PROXY": dropping.url})
    assert done.returncode == 1, done.stderr[-3000:] + done.stdout[-3000:]
    doc = json.loads(done.stdout)
    route = doc["targets"]["route"]
    assert route["path"] == "forward_proxy" and route["variable"] == "HTTPS_PROXY"
    assert route["proxy"] == dropping.url and "from HTTPS_PROXY" in route["text"]
    assert [f["layer"] for f in doc["findings"]] == ["client_proxy"], doc["findings"]
    located = [loc["matrix"]["located"] for loc in doc["localizations"]]
    assert {loc["layer"] for loc in located if loc["layer"]} == {"client_proxy"}
    # the sessions went in tunnels to the TLS front; the router's replay hop (with --url alone:
    # the TLS front reached straight) answered the same payload
    assert f"CONNECT 127.0.0.1:{front.port} " in dropping.log.read_text()
    cells = [c for loc in doc["localizations"] for c in loc["matrix"]["cells"]]
    assert any(c["hop"] == "router" and c["outcome"] == "ok" for c in cells)
    assert any(c["hop"] == "entry_fresh" and c["outcome"] != "ok" for c in cells)


def test_no_proxy_goes_straight_to_the_tls_front_and_passes(
    front: TlsFront, dropping: ForwardProxy
) -> None:
    done = _soak(front, "--no-proxy", env={"HTTPS_PROXY": dropping.url})
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    doc = json.loads(done.stdout)
    assert doc["targets"]["route"]["path"] == "direct"
    assert doc["targets"]["route"]["text"] == "straight (--no-proxy)"
    assert doc["findings"] == []
    # no tunnel through the proxy; the sessions reached the TLS front itself
    assert f"CONNECT 127.0.0.1:{front.port} " not in dropping.log.read_text()
    assert "POST /v1/chat/completions" in (front.workdir / "access.log").read_text()


def test_the_tls_front_is_not_trusted_without_its_certificate(
    front: TlsFront, dropping: ForwardProxy
) -> None:
    # the system's trust store alone: the soak's clients verify the front's certificate
    system = {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt"}
    done = _soak(front, "--no-proxy", env=system)
    assert done.returncode != 0, done.stdout[-3000:]
    assert "certificate verify failed" in done.stdout + done.stderr, done.stderr[-3000:]
