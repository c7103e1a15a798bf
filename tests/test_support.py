"""The test support itself: every spec variant the tests write is a valid PD spec."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.io.specfile import load_spec
from tests.support import REFERENCE_PORTS, free_ports
from tests.support.processes import http_server, listening
from tests.support.servers import SEEN, served, streaming_app
from tests.support.specs import SECRET, PdPorts, pd_spec_toml, write_decode_spec, write_pd_spec


def test_pd_spec_with_proxy_secret_and_worker_env(tmp_path: Path) -> None:
    ports = PdPorts.free()
    spec = write_pd_spec(
        tmp_path, ports=ports, secret=SECRET, worker_env="W=1\n", proxy_args=["--a", "b"]
    )
    loaded = load_spec(spec).spec
    assert list(loaded.services) == ["prefill", "decode", "router", "proxy"]
    assert loaded.service("proxy").port == ports.proxy and loaded.entry_point == "proxy"
    assert loaded.service("prefill").bootstrap_port == ports.bootstrap
    decode = (tmp_path / "env" / "decode.env").read_text()
    assert decode.splitlines()[1:] == [
        "SERVELAB_SIM_TIME_SCALE=0.05", "W=1", f"{DEFAULT_KNOB}=512", f"SECRET_TOKEN={SECRET}"
    ]  # fmt: skip
    assert (tmp_path / "env" / "prefill.env").read_text() == "SERVELAB_SIM_TIME_SCALE=0.05\nW=1\n"
    assert len(set(ports.listened())) == 6


def test_pinned_knobs_remote_host_and_no_env_files(tmp_path: Path) -> None:
    ports = PdPorts.free(proxy=False)
    hosts = '[hosts.gpu]\nssh = "root@127.0.0.1"\n'
    text = pd_spec_toml(
        ports, env_dir=None, knobs={DEFAULT_KNOB: "256"}, host="gpu", hosts_toml=hosts
    )
    (tmp_path / "servelab.toml").write_text(text)
    spec = load_spec(tmp_path / "servelab.toml").spec
    assert all(spec.service(n).host == "gpu" for n in spec.services)
    assert all(spec.service(n).env_file is None for n in spec.services)
    assert "proxy" not in spec.services and ports.proxy == 0 and len(ports.listened()) == 5
    assert f'knobs = {{ {DEFAULT_KNOB} = "256" }}' in text


def test_decode_spec_and_http_server(tmp_path: Path) -> None:
    with http_server({"SERVELAB_X": "1"}) as (port, proc):
        spec = write_decode_spec(tmp_path, port, knobs=("A", "B"), env_text="A=1\n")
        decode = load_spec(spec).spec.service("decode")
        assert decode.port == port and listening(port)
        assert b"SERVELAB_X=1" in Path(f"/proc/{proc.pid}/environ").read_bytes()
    assert (tmp_path / "env" / "decode.env").read_text() == "A=1\n"
    assert proc.poll() is not None


def test_free_ports_never_draw_a_reference_port() -> None:
    assert {8998, 29000, 30000, 30001, 30002, 30003} <= REFERENCE_PORTS
    spare = free_ports(2)
    proposals = iter([*sorted(REFERENCE_PORTS), 30001, *spare])
    assert free_ports(2, draw=lambda: next(proposals)) == spare
    assert not REFERENCE_PORTS & set(free_ports(200))


async def test_streaming_app_counts_the_streams_it_began() -> None:
    app = streaming_app(gap_s=0.001)
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2}
    async with served(app) as url, aiohttp.ClientSession() as http:
        assert app[SEEN].streams == 0
        async with http.post(url + "/v1/chat/completions", json=body) as resp:
            assert resp.status == 200 and b"[DONE]" in await resp.read()
        assert app[SEEN].streams == 1
