"""The router's view against the spec, with the real sglang-router: a worker registered in the
router but absent from the spec is reported with the command that removes it; a prefill the
router lists with another bootstrap port than the spec's is reported with both."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.verify.checks import CheckCode
from servelab.core.verify.health import HealthProbe
from servelab.io.specfile import load_spec
from servelab.ops.verify.verify import verify
from servelab.report.verify import check_detail
from tests.support.http import get_json
from tests.support.specs import PdPorts, pd_spec_toml
from tests.support.stack import SimStack, start_stack


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    st = start_stack(time_scale=0.05)
    try:
        yield st
    finally:
        st.stop()


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "servelab.toml"
    path.write_text(text)
    return path


def _without_decode(text: str) -> str:
    """The spec's text without its decode service (and the router's dependency on it)."""
    head, rest = text.split("[services.decode]", 1)
    _decode, router = rest.split("[services.router]", 1)
    return head + "[services.router]" + router.replace('["prefill", "decode"]', '["prefill"]')


async def test_a_worker_the_spec_does_not_have_is_named_with_its_removal(
    stack: SimStack, tmp_path: Path
) -> None:
    text = _without_decode(pd_spec_toml(PdPorts.of(stack), env_dir=None, knobs=()))
    report = await verify(load_spec(_spec(tmp_path, text)), ["router"], layers=("health",))
    (check,) = report.checks
    assert check.code is CheckCode.HEALTH_WORKERS_UNKNOWN and not check.ok
    assert isinstance(check.data, HealthProbe) and check.data.unknown is not None
    (stale,) = check.data.unknown
    assert stale.url == stack.decode_url and stale.role == "decode"
    listed = get_json(stack.router_url + "/workers")["workers"]
    ids = {w["url"]: w["id"] for w in listed}
    command = ["curl", "-X", "DELETE", f"{stack.router_url}/workers/{ids[stack.decode_url]}"]
    assert list(stale.remove) == command
    assert shlex.join(command) in check_detail(check)


async def test_a_prefill_registered_with_another_bootstrap_port_is_reported(
    stack: SimStack, tmp_path: Path
) -> None:
    ports = PdPorts.of(stack)
    wrong = PdPorts(ports.prefill, ports.bootstrap + 1, ports.decode, ports.router, ports.metrics)
    text = pd_spec_toml(wrong, env_dir=None, knobs=())
    report = await verify(load_spec(_spec(tmp_path, text)), ["router"], layers=("health",))
    (check,) = report.checks
    assert check.code is CheckCode.HEALTH_WORKERS_MISREGISTERED and not check.ok
    assert (
        f"prefill with bootstrap port {ports.bootstrap} (the spec: {ports.bootstrap + 1})"
        in check_detail(check)
    )
