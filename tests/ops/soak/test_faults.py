"""Each simulator fault is localized to its layer (and worker) through the real sglang-router.

One stack per test (a fault can open the router's circuit breaker for 60 s). Each test switches
one fault on, soaks, and checks the top finding, its worker, and the replay matrix that decided
it; the localization's wall time is printed (``LOCTIME ...``) for the closing note.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import pytest

from servelab.core.ledger.codec import encode
from servelab.core.soak.conviction import Standing
from servelab.core.soak.evidence import Localization
from servelab.core.soak.replay import Hop
from servelab.core.soak.result import SoakConfig, SoakResult, Targets, WorkerTarget
from servelab.core.telemetry.layers import Layer
from servelab.ops.soak.soak import soak
from servelab.report.soak.matrix import matrix_lines
from servelab.report.soak.soak import render_soak, soak_json
from servelab.sim.profile import DEFAULT_PROFILE
from servelab.sim.settings import ENV_WARMUP_S
from tests.support.http import post, set_faults
from tests.support.pd2 import two_decode_stack
from tests.support.processes import children
from tests.support.soak import soak_targets
from tests.support.stack import SimStack, sim_stack, stop_process

SCALE = 0.05
#: The soaks that meet a stall send no answer probes: through the fault each probe waits out the
#: idle timeout too (three before the sessions, three beside them), seconds of waiting on
#: answers that none of these tests checks (the findings come from the sessions and the matrix).
NO_PROBES = 0


def _run(config: SoakConfig, targets: Targets, fault: str) -> SoakResult:
    before = children()
    start = time.monotonic()
    result = asyncio.run(soak(config, targets))
    elapsed = time.monotonic() - start
    assert elapsed < config.duration_s + 1.0, f"soak overran its deadline: {elapsed:.1f} s"
    assert children() == before
    for loc in result.localizations:
        m = loc.matrix
        print(
            f"LOCTIME fault={fault} signature={loc.signature} layer={m.layer} worker={m.worker} "
            f"reason={m.located.reason} cells={len(m.cells)} matrix_s={m.elapsed_s:.2f} "
            f"localization_s={loc.elapsed_s:.2f} soak_s={elapsed:.2f}"
        )
        print("\n".join(matrix_lines(loc)))
    return result


def _loc(result: SoakResult) -> Localization:
    assert result.localizations, (result.failures, result.undecided)
    return result.localizations[0]


@pytest.fixture
def proxied() -> Iterator[SimStack]:
    with sim_stack(time_scale=SCALE, proxy=True) as st:
        yield st


def test_a_proxy_that_cuts_streams_is_the_proxy_while_the_router_answers(
    proxied: SimStack,
) -> None:
    assert proxied.proxy_url is not None
    set_faults(proxied.proxy_url, cut_after_bytes=200)
    cfg = SoakConfig(sessions=2, rounds=2, idle_timeout_s=3, duration_s=40)
    result = _run(cfg, soak_targets(proxied), "proxy cut_after_bytes=200")
    top = result.findings[0]
    assert top.layer == "client_proxy", result.findings
    loc = _loc(result)
    assert loc.signature == "reset"
    assert loc.matrix.located.reason == "proxy"  # fails on fresh connections too
    cells = {c.id: c for c in loc.matrix.cells}
    assert cells["matrix.router.router.failing.stream"].ok
    assert not cells["matrix.entry_fresh.entry.failing.stream"].ok
    assert "matrix.router.router.failing.stream" in top.supporting


def test_a_proxy_adding_latency_per_chunk_is_the_proxy(proxied: SimStack) -> None:
    assert proxied.proxy_url is not None
    set_faults(proxied.proxy_url, chunk_delay_ms=2500)
    cfg = SoakConfig(
        sessions=1,
        rounds=2,
        idle_timeout_s=2,
        duration_s=40,
        check_determinism=False,
        answer_probes=NO_PROBES,
    )
    result = _run(cfg, soak_targets(proxied), "proxy chunk_delay_ms=2500")
    assert result.stalls and result.findings[0].layer == "client_proxy", result.findings
    assert _loc(result).matrix.located.reason == "proxy"


def test_a_proxy_that_buffers_whole_responses_is_the_proxy() -> None:
    # Slow engines (time scale 5) so an answer takes seconds: the router streams its first bytes
    # at once, the buffering proxy holds everything until the end, past the idle timeout.
    env = {ENV_WARMUP_S: "0"}
    with sim_stack(time_scale=5.0, proxy=True, env=env, proxy_args=["--buffer"]) as st:
        cfg = SoakConfig(
            sessions=1, rounds=2, idle_timeout_s=1.0, duration_s=60, max_tokens=64,
            check_determinism=False, answer_probes=NO_PROBES,
        )  # fmt: skip
        result = _run(cfg, soak_targets(st), "proxy buffer")
    assert result.stalls and result.stalls[0].phase == "head"
    assert result.findings and result.findings[0].layer == "client_proxy", result.findings
    cells = {c.id: c for c in _loc(result).matrix.cells}
    assert cells["matrix.router.router.failing.stream"].ok


def test_kv_transfer_failures_over_a_size_are_the_decode_path(proxied: SimStack) -> None:
    set_faults(proxied.decode_url, transfer_fail_over_tokens=1)
    cfg = SoakConfig(sessions=2, rounds=2, idle_timeout_s=3, duration_s=40)
    result = _run(cfg, soak_targets(proxied), "transfer_fail_over_tokens=1")
    top = result.findings[0]
    assert (top.layer, top.worker) == ("decode_transfer", "decode"), result.findings
    assert _loc(result).matrix.located.reason == "engine_pair"


def test_prefill_down_is_the_prefill(proxied: SimStack) -> None:
    stop_process(proxied.procs.pop("prefill"))
    cfg = SoakConfig(sessions=1, rounds=2, idle_timeout_s=3, duration_s=40)
    result = _run(cfg, soak_targets(proxied), "prefill down")
    top = result.findings[0]
    assert (top.layer, top.worker) == ("prefill", "prefill"), result.findings
    loc = _loc(result)
    assert loc.matrix.located.hop == "pair"
    assert all(c.side == "prefill" for c in loc.matrix.cells if c.hop == "pair")


def test_an_open_circuit_breaker_is_the_router(proxied: SimStack) -> None:
    # The decode fails fast for a moment: enough 5xx to open the router's breaker (60 s), then
    # the decode is fine again: straight to the pair works, the router still refuses.
    set_faults(proxied.decode_url, fail_fast_s=3)
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2}
    for _ in range(4):
        post(proxied.router_url + "/v1/chat/completions", body)
    time.sleep(3.2)
    cfg = SoakConfig(sessions=1, rounds=2, idle_timeout_s=3, duration_s=40)
    result = _run(cfg, soak_targets(proxied), "circuit breaker open")
    top = result.findings[0]
    assert top.layer == "router", result.findings
    assert any(".cb_open." in i for i in top.supporting), top.supporting
    assert _loc(result).matrix.located.reason == "router"


def test_the_guilty_long_context_knob_hangs_long_payloads_in_decode() -> None:
    knob = DEFAULT_PROFILE.mla_tile_knob_name
    with sim_stack(time_scale=SCALE, proxy=True, decode_env={knob: "4"}) as st:
        cfg = SoakConfig(
            sessions=1,
            rounds=6,
            idle_timeout_s=2,
            duration_s=60,
            turn_words=120,
            answer_probes=NO_PROBES,
        )
        result = _run(cfg, soak_targets(st), f"{knob}=4")
    assert result.stalls, result.failures
    top = result.findings[0]
    assert (top.layer, top.worker) == ("decode_transfer", "decode"), result.findings
    loc = _loc(result)
    assert loc.matrix.located.size_dependent  # the minimal payload gets through the same pair
    b = loc.matrix.bisection
    assert b is not None and b.ok_bytes is not None and b.fail_bytes is not None
    assert b.ok_bytes < b.fail_bytes


# ------------------------------------------------------------------- one of two decodes wedged
def test_one_of_two_decodes_wedged_with_health_200_and_no_metrics_is_named() -> None:
    with two_decode_stack() as st:
        d0, d1 = st.decode_urls
        set_faults(d1, wedge=True, no_metrics=True)
        workers = (
            WorkerTarget("prefill", "prefill", st.prefill_url, st.bootstrap_port),
            WorkerTarget("decode0", "decode", d0),
            WorkerTarget("decode1", "decode", d1),
        )
        router = st.router_url
        targets = Targets(router, router, workers, metrics_url=st.prometheus_url)
        cfg = SoakConfig(
            sessions=2, rounds=3, idle_timeout_s=2, duration_s=40, answer_probes=NO_PROBES
        )
        result = _run(cfg, targets, "decode1 wedged, no /metrics")
    top = result.findings[0]
    assert (top.layer, top.worker) == ("decode_transfer", "decode1"), result.findings
    assert encode(result)["findings"][0]["worker"] == "decode1"  # stored
    assert (
        json.loads(soak_json(result))["findings"][0]["evidence"][0]["text"] == "worker: decode1"
    )  # worded
    assert "worker decode1" in render_soak(result)
    obs = {o.id: o for o in result.observations}
    assert obs["metrics.decode1.progress"].healthy is None  # unknown, not healthy
    assert obs["probe.decode1.health"].healthy is True
    cells = {c.id: c for c in _loc(result).matrix.cells}
    assert cells["matrix.pair.prefill+decode0.failing.stream"].ok
    assert not cells["matrix.pair.prefill+decode1.failing.stream"].ok
    # the conviction rule: only the decode/transfer path is named; the router, which the pair
    # replay bypasses while the same payload fails the same way, is exonerated and said so
    assert {f.layer for f in result.findings} <= {Layer.DECODE_TRANSFER, Layer.ENGINE_WEDGE}
    text = render_soak(result)
    assert Layer.ROUTER not in {f.layer for f in result.findings}, text
    for e in result.exonerated:  # what a rule suspected outside the pair is cleared by it
        assert e.standing == Standing.EXONERATED and e.by == Hop.PAIR, text
        assert e.layer in (Layer.ROUTER, Layer.CLIENT_PROXY), text
        assert "matrix.pair.prefill+decode1.failing.stream" in e.because, text
    if result.exonerated:
        assert "straight to the prefill/decode pair, without the router" in text, text
    assert [e["standing"] for e in json.loads(soak_json(result))["exonerated"]] == [
        e.standing for e in result.exonerated
    ]
