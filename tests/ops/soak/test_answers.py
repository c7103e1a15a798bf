"""A soak's answer probes: verify's greedy probes at C1 before the sessions and again under load,
through the real router. Clean, nothing is said; with the simulator's KV-transfer corruption (HTTP
200, usage unchanged) the answers are wrong, and against the references verify stored from the
good state they carry the hand-off's signature: the soak's finding is at the decode's transfer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.soak.answers import ANSWER_KV_TRANSFER, ANSWER_WRONG, PROBE_SESSION
from servelab.core.soak.result import SoakConfig, SoakResult
from servelab.core.telemetry.layers import Layer
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import load_spec
from servelab.ops.soak.soak import soak
from servelab.ops.verify.answers import answers_owner
from servelab.ops.verify.verify import verify
from servelab.report.soak.soak import render_soak
from tests.support.http import set_faults
from tests.support.soak import soak_targets
from tests.support.specs import PdEnv, PdPorts, pd_spec_toml
from tests.support.stack import SimStack, start_stack

pytestmark = pytest.mark.timeout(240)
NAME = "soak-answers"


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    st = start_stack(time_scale=0.05)
    try:
        yield st
    finally:
        st.stop()


def _config(probes: int = 3, owner: str = NAME) -> SoakConfig:
    return SoakConfig(sessions=4, rounds=3, idle_timeout_s=10, duration_s=60,
                      answer_probes=probes, answers_from=owner)  # fmt: skip


def _soak(stack: SimStack, ledger: Ledger | None, config: SoakConfig) -> SoakResult:
    return asyncio.run(soak(config, soak_targets(stack), ledger=ledger))


def _probe_issues(result: SoakResult) -> list[tuple[str, int]]:
    return [(i.kind, i.round) for i in result.correctness if i.session == PROBE_SESSION]


def test_clean_answers_say_nothing_and_a_wrong_kv_is_found_at_the_transfer(
    stack: SimStack, tmp_path: Path
) -> None:
    PdEnv(knob=None).write(tmp_path / "env")
    (tmp_path / "servelab.toml").write_text(pd_spec_toml(PdPorts.of(stack), name=NAME, knobs=()))
    loaded = load_spec(tmp_path / "servelab.toml")
    owner = answers_owner(loaded)  # the deployment's, as `servelab soak` names it
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        verified = asyncio.run(verify(loaded, layers=("e2e",), ledger=ledger))
        assert verified.ok  # the references, from the good state
        clean = _soak(stack, ledger, _config(owner=owner))
        set_faults(stack.decode_url, kv_corrupt=True)
        try:
            wrong = _soak(stack, ledger, _config(owner=owner))
        finally:
            set_faults(stack.decode_url, kv_corrupt=False)
    assert _probe_issues(clean) == [] and not clean.correctness, render_soak(clean)
    issues = _probe_issues(wrong)
    for rnd in (0, 1):  # at C1 and under load: every probe wrong, the hand-off's signature
        assert issues.count((ANSWER_WRONG, rnd)) == 3, issues
        assert (ANSWER_KV_TRANSFER, rnd) in issues, issues
    assert wrong.findings and wrong.findings[0].layer is Layer.DECODE_TRANSFER, render_soak(wrong)
    assert not wrong.ok
    assert "answer kv transfer" in render_soak(wrong)


def test_without_references_wrong_answers_are_still_caught(stack: SimStack) -> None:
    set_faults(stack.decode_url, kv_corrupt=True)
    try:
        result = _soak(stack, None, _config())
        off = _soak(stack, None, _config(probes=0))
    finally:
        set_faults(stack.decode_url, kv_corrupt=False)
    issues = _probe_issues(result)
    # the tool call's arguments do not parse and the pass key is lost, at C1 already
    assert issues.count((ANSWER_WRONG, 0)) == 2 and ANSWER_KV_TRANSFER not in dict(issues)
    assert result.findings and result.findings[0].layer is Layer.CORRECTNESS
    assert _probe_issues(off) == []
