"""The soak's run telemetry is evidence, through the real sglang-router and simulated workers.

A decode whose KV transfers fail (the simulator's ``transfer_fail_over_tokens`` switch) makes the
transfer rule fire on what the decode itself counted, and the finding cites that counter; the
router's own counters point at its workers. A clean soak fires no rule.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator

import pytest

from servelab.core.soak.result import SoakConfig, SoakResult
from servelab.core.telemetry.promtext import parse_exposition
from servelab.core.telemetry.rules import TelemetryReading
from servelab.ops.soak.soak import soak
from servelab.report.soak.soak import render_soak, soak_json
from tests.support.http import set_faults
from tests.support.processes import children
from tests.support.soak import soak_targets
from tests.support.stack import SimStack, sim_stack

FAILED = "sglang:num_transfer_failed_reqs_total"


@pytest.fixture
def stack() -> Iterator[SimStack]:
    with sim_stack(time_scale=0.05) as st:
        yield st


def _counted(url: str, name: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
        exp = parse_exposition(resp.read().decode())
    return sum(v for (n, _), v in exp.values().items() if n == name)


def _readings(result: SoakResult) -> dict[str, TelemetryReading]:
    return {o.id: o for o in result.observations if isinstance(o, TelemetryReading)}


def _soak(st: SimStack, config: SoakConfig) -> SoakResult:
    before = children()
    result = asyncio.run(soak(config, soak_targets(st)))
    assert children() == before
    return result


def test_failing_transfers_fire_the_transfer_rule_citing_the_decodes_counter(
    stack: SimStack,
) -> None:
    set_faults(stack.decode_url, transfer_fail_over_tokens=1)
    counted_before = _counted(stack.decode_url, FAILED)
    # No localization: no replay matrix, so the finding stands on the run's telemetry alone.
    cfg = SoakConfig(sessions=2, rounds=2, idle_timeout_s=3, duration_s=30, localize=False)
    result = _soak(stack, cfg)
    grew = _counted(stack.decode_url, FAILED) - counted_before
    assert result.failures and grew > 0
    top = result.findings[0]
    assert (top.layer, top.worker) == ("decode_transfer", "decode"), result.findings
    assert "telemetry.engine_transfer.decode" in top.supporting
    obs = _readings(result)
    transfer = obs["telemetry.engine_transfer.decode"]
    assert transfer.healthy is False
    (cite,) = transfer.evidence.cites
    assert (cite.source, cite.series.split("{")[0]) == ("decode", FAILED)
    assert cite.value == grew  # what the decode counted over the soak, nothing else
    # The decode's error comes inside a 200 stream: the router counted nothing (and says so).
    router = obs["telemetry.router_errors.router"]
    assert router.healthy is True and router.evidence.state == "quiet"
    # Stored and worded with the metric.
    evidence = json.loads(soak_json(result))["findings"][0]["evidence"]
    assert any(e["id"] == "telemetry.engine_transfer.decode" for e in evidence)
    assert f"{FAILED}" in render_soak(result)


def test_a_decode_answering_500_fires_the_router_rule_pointing_at_the_workers(
    stack: SimStack,
) -> None:
    set_faults(stack.decode_url, fail_fast_s=60)
    cfg = SoakConfig(sessions=2, rounds=2, idle_timeout_s=3, duration_s=30, localize=False)
    result = _soak(stack, cfg)
    assert result.failures and not result.ok
    obs = _readings(result)
    router = obs["telemetry.router_errors.router"]
    assert router.healthy is False and router.evidence.points_at == "workers", router
    cited = {c.series.split("{")[0]: c.value for c in router.evidence.cites}
    assert cited["smg_worker_errors_total"] > 0
    assert obs["telemetry.engine_transfer.decode"].healthy is True  # not a transfer failure
    assert "the router counted its workers failing: smg_worker_errors_total" in render_soak(result)


def test_a_clean_soak_fires_no_telemetry_rule(stack: SimStack) -> None:
    cfg = SoakConfig(sessions=2, rounds=3, idle_timeout_s=3, duration_s=40)
    result = _soak(stack, cfg)
    assert result.ok, render_soak(result)
    tele = list(_readings(result).values())
    assert {o.id for o in tele} >= {
        "telemetry.router_errors.router", "telemetry.engine_transfer.decode",
        "telemetry.client_vs_server.decodes",
    }  # fmt: skip
    assert all(o.healthy is not False for o in tele), tele
    client = next(o for o in tele if o.id == "telemetry.client_vs_server.decodes")
    assert client.healthy is True  # the client's tokens and the decode's agree within 25%
    counted = {c.series: c.value for c in client.evidence.cites if c.source == "client"}
    assert counted["output_tokens"] > 0
