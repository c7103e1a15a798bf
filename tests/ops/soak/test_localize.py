"""Every failure is localized, and cold is not hung (issue 9, §1-§3), through the real router.

Each test runs a real stack (simulated workers, the real sglang-router, the sim proxy) with one
fault switched on, soaks it, and checks the finding: its layer, its worker, the replay matrix that
decided it. A cold restart followed by a soak convicts nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from servelab.core.soak.result import SoakConfig, SoakResult, Targets
from servelab.ops.soak.soak import soak
from servelab.sim.settings import ENV_WARMUP_S
from tests.support.http import set_faults
from tests.support.processes import children
from tests.support.soak import soak_targets
from tests.support.stack import SimStack, sim_stack

SCALE = 0.05


def _run(config: SoakConfig, targets: Targets) -> SoakResult:
    before = children()
    start = time.monotonic()
    result = asyncio.run(soak(config, targets))
    elapsed = time.monotonic() - start
    assert elapsed < config.duration_s + 1.0, f"soak overran its deadline: {elapsed:.1f} s"
    assert children() == before
    return result


@pytest.fixture
def stack() -> Iterator[SimStack]:
    """A stack of its own per test (a fault can open the router's circuit breaker for 60 s)."""
    with sim_stack(time_scale=SCALE, proxy=True) as st:
        yield st


def test_kv_transfer_failures_are_localized_to_the_decode_transfer_path(stack: SimStack) -> None:
    set_faults(stack.decode_url, transfer_fail_prob=1.0)
    try:
        cfg = SoakConfig(sessions=2, rounds=2, idle_timeout_s=3, duration_s=40)
        result = _run(cfg, soak_targets(stack))
    finally:
        set_faults(stack.decode_url, transfer_fail_prob=0.0)
    assert result.errors and not result.stalls
    assert result.localizations, "a KV-transfer failure must start a localization"
    top = result.findings[0]
    assert top.layer == "decode_transfer", result.findings
    assert top.worker == "decode"
    loc = result.localizations[0]
    assert loc.signature in ("kv_transfer", "http_5xx")  # the router may answer 503 after retries
    assert loc.matrix.layer == "decode_transfer" and loc.matrix.worker == "decode"


def test_a_soak_right_after_a_cold_restart_convicts_nothing(stack: SimStack) -> None:
    # The decode's first request after the restart costs 4 s (its warm-up), more than the idle
    # timeout: the soak must see it as a cold start, not as a hang.
    stack.restart_workers(decode_env={ENV_WARMUP_S: str(4.0 / SCALE)})
    cfg = SoakConfig(sessions=2, rounds=2, idle_timeout_s=3, duration_s=60, connection="fresh")
    result = _run(cfg, soak_targets(stack))
    assert result.findings == (), result.findings
    assert all(s.session >= 0 and s.round >= 0 for s in result.stalls)
    assert result.start is not None and result.start.start == "cold"
    assert result.ok, (result.stalls, result.errors)
