"""A soak that fails on a mismatched P/D pair names the mismatch as its finding: on vLLM, a
prefill with block size 64 and a decode with 32 fail every request through the real vllm-router
(the NIXL handshake refuses the prefill's blocks); the localization reads what both workers report
and the diagnosis blames the pair, not the transfer path."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from servelab.core.soak.diagnose import diagnose
from servelab.core.soak.evidence import SoakEvidence
from servelab.core.soak.result import SoakConfig, Targets, WorkerTarget
from servelab.core.soak.signatures import Failure, Signature
from servelab.core.telemetry.layers import Layer
from servelab.core.verify.pair import (
    FieldRule,
    FieldVerdict,
    PairFieldCheck,
    PairReport,
    PairValue,
)
from servelab.ops.soak.soak import soak
from servelab.report.soak.words import layer_title
from tests.support.vllmstack import VllmStack, vllm_stack


@pytest.fixture
def stack() -> Iterator[VllmStack]:
    with vllm_stack(
        time_scale=0.05, env={"VLLM_SERVER_DEV_MODE": "1"}, prefill_args=["--block-size", "64"],
        decode_args=["--block-size", "32"],
    ) as st:  # fmt: skip
        yield st


def _targets(st: VllmStack) -> Targets:
    workers = (
        WorkerTarget("prefill", "prefill", st.prefill_url, st.side_port),
        WorkerTarget("decode", "decode", st.decode_url),
    )
    metrics = f"http://127.0.0.1:{st.prometheus_port}"
    return Targets(st.router_url, st.router_url, workers, metrics_url=metrics, engine="vllm")


def test_a_soak_on_a_mismatched_pair_names_the_mismatch(stack: VllmStack) -> None:
    cfg = SoakConfig(sessions=1, rounds=2, idle_timeout_s=3, duration_s=40, check_determinism=False)
    result = asyncio.run(soak(cfg, _targets(stack)))
    assert result.localizations, (result.failures, result.undecided)
    (pair,) = result.localizations[0].pairs
    assert (pair.prefill, pair.decode) == ("prefill", "decode")
    assert [f.name for f in pair.mismatched] == ["page_size"]
    top = result.findings[0]
    assert (top.layer, top.worker) == ("pd_pair", "decode"), result.findings


def _mismatch() -> PairReport:
    side = ("vllm_config.cache_config.block_size",)
    page = PairFieldCheck("page_size", FieldRule.DECODE_MULTIPLE, PairValue(True, "64", *side),
                          PairValue(True, "32", *side), FieldVerdict.MISMATCH)  # fmt: skip
    return PairReport("prefill", "decode", (page,))


def test_the_pair_rule_leads_when_requests_failed_and_stays_silent_otherwise() -> None:
    failed = Failure(Signature.HTTP_5XX, 0, 1, 2000, 0.0, 0, 500)
    found = diagnose(SoakEvidence(False, failures=(failed,), pairs=(_mismatch(),)))
    assert found[0].layer is Layer.PD_PAIR and found[0].worker == "decode"
    assert found[0].supporting[0] == "pair.prefill.decode"
    assert not diagnose(SoakEvidence(False, pairs=(_mismatch(),)))  # no failure: no finding
    assert "P/D pair" in layer_title(Layer.PD_PAIR)
