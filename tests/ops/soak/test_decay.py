"""Long-horizon decay: a slow KV leak in the simulated decode is found by an hour-long soak
(compressed by the time scale) and localized to the decode; the same soak without it names
nothing.

The decode runs with ``SERVELAB_SIM_KV_LEAK`` (the ``kv_leak`` fault, :mod:`servelab.sim.leak`):
after a hand-off, with that probability (a seeded draw), a ghost of the request stays in its
transfer queue holding its KV pages. Every answer is whole: nothing fails, only the decode's own
gauges (``sglang:token_usage``, ``sglang:num_decode_transfer_queue_reqs``) climb and never return
to their floor. At time scale 0.01 a wall second is a hundred modelled ones: the soak's 36 rounds,
a second of thinking apart, last 36 s or more, an hour of the modelled engines.
"""

from __future__ import annotations

import asyncio
import json
import time

from servelab.core.soak.creep import RULE_CREEP, CreepKind, fit
from servelab.core.soak.result import SoakConfig, SoakResult
from servelab.core.telemetry.layers import Layer
from servelab.core.telemetry.rules import TelemetryReading
from servelab.ops.soak.soak import soak
from servelab.report.soak.creep import CREEP_ADVICE
from servelab.report.soak.soak import render_soak, soak_json
from servelab.sim.faults import ENV_VARS
from tests.support.processes import children
from tests.support.soak import soak_targets
from tests.support.stack import sim_stack

SCALE = 0.01
HOUR_S = 3600 * SCALE  # an hour of the modelled engines, in wall seconds
#: two agents, 36 rounds each, a second of thinking between rounds: the decode idles between
#: requests, so a healthy gauge falls back to its floor every round
CONFIG = SoakConfig(
    sessions=2, rounds=36, think_time_s=1.0, idle_timeout_s=3, duration_s=120,
    check_determinism=False, answer_probes=0,
)  # fmt: skip


def _soak(decode_env: dict[str, str]) -> SoakResult:
    before = children()
    with sim_stack(time_scale=SCALE, decode_env=decode_env) as st:
        start = time.monotonic()
        result = asyncio.run(soak(CONFIG, soak_targets(st)))
        took = time.monotonic() - start
    assert children() == before
    print(f"DECAY leak={decode_env or 'none'} soak_s={took:.1f} modelled_h={took / HOUR_S:.2f}")
    print(render_soak(result))
    assert took >= HOUR_S and not result.deadline_hit  # an hour of the engines, every round
    assert result.sessions.completed == CONFIG.sessions
    return result


def _creep(result: SoakResult, service: str) -> TelemetryReading:
    found = [
        o for o in result.observations
        if isinstance(o, TelemetryReading) and o.id == f"telemetry.{RULE_CREEP}.{service}"
    ]  # fmt: skip
    assert len(found) == 1, [o.id for o in result.observations]
    return found[0]


def _gauge(result: SoakResult, service: str, name: str) -> list[tuple[float, float]]:
    assert result.telemetry is not None
    source = result.telemetry.source(service)
    assert source is not None
    return [p for k, pts in source.gauges.items() if k.startswith(name + "{") for p in pts]


def test_a_slow_kv_leak_is_found_by_an_hour_long_soak_and_localized_to_the_decode() -> None:
    result = _soak({ENV_VARS["kv_leak"]: "0.3"})
    # nothing failed: only decay shows the leak
    assert not result.failures and not result.stalls and not result.errors
    assert [(f.layer, f.worker) for f in result.findings] == [(Layer.DECODE_TRANSFER, "decode")], (
        result.findings
    )
    finding = result.findings[0]
    assert finding.supporting == (f"telemetry.{RULE_CREEP}.decode",)
    reading = _creep(result, "decode")
    assert reading.healthy is False
    cited = {(c.series, c.kind): c.value for c in reading.evidence.cites}
    assert cited[("sglang:token_usage", "rise")] >= 0.005
    assert cited[("sglang:num_decode_transfer_queue_reqs", "rise")] >= 3
    # the queue's oldest entry only ages: it has not been empty for most of the soak
    assert cited[("sglang:num_decode_transfer_queue_reqs", "oldest_s")] > HOUR_S / 2
    assert _creep(result, "prefill").healthy is True  # the prefill returns to its floor
    assert CREEP_ADVICE in render_soak(result)
    assert json.loads(soak_json(result))["findings"][0]["advice"] == CREEP_ADVICE
    assert CreepKind.KV_USAGE.value == "kv_usage"


def test_the_same_soak_without_the_leak_names_no_creep() -> None:
    result = _soak({})
    assert result.ok and not result.findings, result.findings
    assert _creep(result, "decode").healthy is True
    assert _creep(result, "prefill").healthy is True
    # the control's gauges came back to their floor: the same fit, nothing left over
    usage = fit(_gauge(result, "decode", "sglang:token_usage"))
    queue = fit(_gauge(result, "decode", "sglang:num_decode_transfer_queue_reqs"))
    assert usage is not None and queue is not None
    assert usage.end == usage.start and queue.end == queue.start == 0
