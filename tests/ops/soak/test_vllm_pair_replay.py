"""On vLLM the direct pair replay speaks NIXL: the prefill leg with ``kv_transfer_params``, then
the decode leg with the params it answered, so a KV-transfer failure is reproduced on the pair
(and localized to the decode's transfer path), through the real vllm-router.

The failure: the prefill frees its blocks at once (``VLLM_NIXL_ABORT_REQUEST_TIMEOUT=0``), so
every decode's NIXL read fails; a request without ``kv_transfer_params`` (what the SGLang-style
pair sent before) never reads and would pass."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from servelab.core.soak.result import SoakConfig, Targets, WorkerTarget
from servelab.ops.soak.soak import soak
from servelab.sim.nixl import ENV_ABORT_TIMEOUT
from tests.support.vllmstack import VllmStack, vllm_stack


@pytest.fixture
def stack() -> Iterator[VllmStack]:
    with vllm_stack(time_scale=0.05, env={ENV_ABORT_TIMEOUT: "0"}) as st:
        yield st


def _targets(st: VllmStack) -> Targets:
    workers = (
        WorkerTarget("prefill", "prefill", st.prefill_url, st.side_port),
        WorkerTarget("decode", "decode", st.decode_url),
    )
    metrics = f"http://127.0.0.1:{st.prometheus_port}"
    return Targets(st.router_url, st.router_url, workers, metrics_url=metrics, engine="vllm")


def test_a_failed_kv_transfer_is_reproduced_on_the_nixl_pair(stack: VllmStack) -> None:
    cfg = SoakConfig(sessions=1, rounds=2, idle_timeout_s=3, duration_s=40, check_determinism=False)
    result = asyncio.run(soak(cfg, _targets(stack)))
    assert result.localizations, (result.failures, result.undecided)
    top = result.findings[0]
    assert (top.layer, top.worker) == ("decode_transfer", "decode"), result.findings
    matrix = result.localizations[0].matrix
    pair = [c for c in matrix.cells if c.hop == "pair"]
    # the prefill leg answered its kv_transfer_params; the decode's NIXL read with them failed:
    # the pair fails on the decode's side, as the router's request did
    assert pair and all(not c.ok and c.side == "decode" for c in pair), pair
    assert all(c.status == 500 and "NIXL read" in c.detail for c in pair), pair
