"""Deployment specs for tests: the reference PD topology on free loopback ports.

``write_pd_spec`` writes ``servelab.toml`` and its env files under ``root``: simulated prefill and
decode, the real sglang-router, optionally a simulated proxy in front of the router. Every port is
picked at run time (below the ephemeral range, see :func:`tests.support.free_ports`).
"""

from __future__ import annotations

from pathlib import Path

from servelab.core.spec import DEFAULT_KNOB
from tests.support import free_ports

__all__ = ["write_pd_spec"]


def write_pd_spec(
    root: Path,
    *,
    knob: str | None = "512",
    time_scale: float = 0.05,
    decode_env: str = "",
    proxy_args: list[str] | None = None,
    name: str = "test-pd",
) -> Path:
    """Write a PD spec (prefill, decode, router, and a proxy when ``proxy_args`` is not None)."""
    p, d, r, b, m, x = free_ports(6)
    env = root / "env"
    env.mkdir(parents=True, exist_ok=True)
    scale = f"SERVELAB_SIM_TIME_SCALE={time_scale}\n"
    knob_line = f"{DEFAULT_KNOB}={knob}\n" if knob is not None else ""
    (env / "prefill.env").write_text(scale)
    (env / "decode.env").write_text(f"# decode\n{scale}{knob_line}{decode_env}")
    (env / "router.env").write_text("")
    text = f"""name = "{name}"
state_dir = "state"

[services.prefill]
role = "prefill"
url = "http://127.0.0.1:{p}"
start = "sim"
bootstrap_port = {b}
env_file = "env/prefill.env"
ready_timeout_s = 60

[services.decode]
role = "decode"
url = "http://127.0.0.1:{d}"
start = "sim"
env_file = "env/decode.env"
knobs = ["{DEFAULT_KNOB}"]
depends_on = ["prefill"]
ready_timeout_s = 60

[services.router]
role = "router"
url = "http://127.0.0.1:{r}"
start = "router"
env_file = "env/router.env"
depends_on = ["prefill", "decode"]
ready_timeout_s = 90
router = {{ policy = "round_robin", prometheus_port = {m}, health_check_interval_s = 1 }}
"""
    if proxy_args is not None:
        args = ", ".join(f'"{a}"' for a in proxy_args)
        text += f"""
[services.proxy]
role = "proxy"
url = "http://127.0.0.1:{x}"
start = "sim"
args = [{args}]
depends_on = ["router"]
ready_timeout_s = 30
"""
    spec = root / "servelab.toml"
    spec.write_text(text, encoding="utf-8")
    return spec
