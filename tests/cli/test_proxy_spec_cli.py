"""A real nginx as the spec's ``role = "proxy"`` service: ``up`` starts it (its start command, its
own config file), ``verify`` goes through it, the soak localizes its fault to it, and ``case test``
bypasses it (the workload through it against straight to the router) and convicts it; ``down``
stops it. The nginx is misconfigured with a body limit (413 once a session's history passes
6 KB), as the issue's first class.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import free_port, run_cli
from tests.support.proxies import ProxyConfig, proxy_argv, write_config
from tests.support.specs import PdPorts, write_pd_spec

#: Past verify's probe (about 4 KB), short of a session's history after a few rounds.
LIMIT = ProxyConfig("nginx", "body_limit", top=("client_max_body_size 6k;",))


def _spec(root: Path) -> tuple[Path, str]:
    """The simulated PD deployment behind the real router, and nginx in front as its proxy."""
    ports = PdPorts.free(proxy=False)
    spec = write_pd_spec(root, ports=ports, time_scale=0.05, name="nginx-proxy")
    proxy = write_config(LIMIT, root / "nginx", f"http://127.0.0.1:{ports.router}", free_port())
    start = " ".join(proxy_argv("nginx", proxy.workdir, proxy.config_file))
    spec.write_text(
        spec.read_text()
        + f"""
[services.proxy]
role = "proxy"
url = "{proxy.url}"
start = "{start}"
depends_on = ["router"]
ready_timeout_s = 30
"""
    )
    return spec, proxy.url


def _json(*args: str, code: int = 0, timeout: float = 300) -> Any:
    done = run_cli(*args, "--json", timeout=timeout)
    assert done.returncode == code, done.stderr[-3000:] + done.stdout[-3000:]
    return json.loads(done.stdout)


@pytest.mark.timeout(600)
def test_nginx_as_the_specs_proxy_is_started_verified_localized_and_bypassed(
    tmp_path: Path,
) -> None:
    spec, url = _spec(tmp_path)
    f, led = ("-f", str(spec)), ("--ledger", str(tmp_path / "ledger.db"))
    up = run_cli("up", *f, timeout=300)
    try:
        assert up.returncode == 0, up.stderr
        assert "proxy" in up.stdout
        # a chat completion through nginx; its long prompt (8,192 tokens) is past the body limit:
        # verify fails on it, naming the refusal, where before only the soak found the proxy
        checked = _json("verify", *f, code=1)
        e2e = [c for c in checked["checks"] if c["layer"] == "e2e"]
        (entry,) = [c for c in e2e if c["code"].startswith("e2e.long")]
        assert entry["code"] == "e2e.long_failed" and "status 413" in entry["detail"], entry
        assert "short prompts ok" in entry["detail"]
        assert "the entry point refuses long prompts" in entry["detail"], entry
        assert all(c["ok"] for c in e2e if c is not entry), e2e
        case = _json("case", "open", "agents fail behind the proxy", *led)["id"]
        failing = _json("soak", *f, *led, "--sessions", "4", "--rounds", "10", "--idle-timeout",
                        "3", "--duration", "60", "--case", str(case), code=1)  # fmt: skip
        assert failing["targets"]["entry_url"] == url
        assert [f["layer"] for f in failing["findings"]] == ["client_proxy"]
        assert any(o["kind"] == "answers.front" for o in failing["observations"])
        _json("case", "suspect", str(case), "component:proxy", "--reason", "413s", *led)
        tested = _json("case", "test", str(case), "component:proxy", "--rounds", "1", *f, *led)
        assert (tested["suspect"]["failed"], tested["revert"]["failed"]) == (4, 0), tested
        assert tested["outcome"] == "convicted"
    finally:
        down = run_cli("down", *f, timeout=120)
    assert down.returncode == 0, down.stderr
    assert not (tmp_path / "nginx" / "nginx.pid").exists()  # nginx stopped, its pid file gone
