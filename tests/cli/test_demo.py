"""The demo's second spec: the embedded default plus the faulty proxy, with absolute paths."""

from __future__ import annotations

from pathlib import Path

from servelab.cli.demo import proxy_spec_text
from servelab.core.deploy.defaultspec import DEFAULT_SPEC_TOML
from servelab.core.deploy.spec import parse_spec, start_order


def test_proxy_spec_is_the_default_plus_a_stalling_proxy(tmp_path: Path) -> None:
    spec = parse_spec(proxy_spec_text(tmp_path / "state", stall_after=3))
    default = parse_spec(DEFAULT_SPEC_TOML)
    assert start_order(spec) == ["prefill", "decode", "router", "proxy"]
    assert spec.entry_point == "proxy"
    assert spec.services["proxy"].args == ["--stall-reused-after", "3"]
    for name in ("prefill", "decode", "router"):
        assert spec.services[name].url == default.services[name].url
        env_file = spec.services[name].env_file
        assert env_file is not None and env_file.startswith(str(tmp_path / "state"))
    assert spec.state_dir == str(tmp_path / "state")
