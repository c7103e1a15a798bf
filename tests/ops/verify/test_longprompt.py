"""The e2e layer's long prompt on real stacks (real simulated workers, the real router): a P/D pair
whose KV transfer fails for every prompt over 3,000 tokens passes the short probes and fails
verify with ``e2e.long_failed``, saying why; a healthy stack passes, the prompt sized from the
engines' own limit (the cap on a default stack, the smaller limit on one whose context and pool
are small: the simulator admits a prompt its own ``/server_info`` says fits). Which requests a
soak's bound applies to (:func:`~servelab.ops.verify.e2e.bounded_by`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.ledger.codec import decode, encode
from servelab.core.soak.deadlines import Deadlines
from servelab.core.verify.checks import Check, CheckCode
from servelab.core.verify.contract import VerifyReport
from servelab.core.verify.e2e import E2EProbe
from servelab.core.verify.longprompt import LONG_PROMPT_CAP, TEMPLATE_HEADROOM
from servelab.io.specfile import load_spec
from servelab.ops.verify.e2e import E2EOptions, bounded_by
from servelab.ops.verify.verify import verify
from servelab.report.verify import check_detail, render_verify
from tests.support.specs import PdEnv, PdPorts, pd_spec_toml
from tests.support.stack import SimStack, start_stack

SCALE = 0.05
FAULT = "SERVELAB_SIM_TRANSFER_FAIL_OVER_TOKENS"


async def _verify(tmp_path: Path, stack: SimStack) -> VerifyReport:
    PdEnv(time_scale=SCALE).write(tmp_path / "env")
    (tmp_path / "servelab.toml").write_text(pd_spec_toml(PdPorts.of(stack), name="long"))
    return await verify(load_spec(tmp_path / "servelab.toml"), layers=["e2e"])


def _stack(env: dict[str, str] | None = None, args: Sequence[str] = ()) -> SimStack:
    return start_stack(time_scale=SCALE, env=env, decode_env={DEFAULT_KNOB: "512"},
                       prefill_args=args, decode_args=args)  # fmt: skip


def _probe(report: VerifyReport) -> tuple[Check, E2EProbe]:
    check = next(c for c in report.layer("e2e") if isinstance(c.data, E2EProbe))
    assert isinstance(check.data, E2EProbe) and check.data.long is not None
    return check, check.data


@pytest.mark.timeout(180)
async def test_a_transfer_failing_over_3000_tokens_fails_verify_and_says_why(
    tmp_path: Path,
) -> None:
    stack = _stack({FAULT: "3000"})
    try:
        report = await _verify(tmp_path, stack)
    finally:
        stack.stop()
    check, probe = _probe(report)
    assert not report.ok, render_verify(report)
    assert check.code is CheckCode.E2E_LONG_FAILED and not check.ok
    assert probe.status == 200 and probe.completion_tokens > 0  # the short probe went through
    long = probe.long
    assert long is not None and long.size == LONG_PROMPT_CAP and long.error is not None
    detail = check_detail(check)
    assert detail.startswith(f"short prompts ok, a long prompt of {LONG_PROMPT_CAP:,} tokens")
    assert "max_req_input_len" in detail and "transfer failed" in detail.lower()
    assert "KV transfer of long prompts fails" in detail
    # the check count holds: the answer probes still ran after the long prompt's failure
    assert [c.code for c in report.layer("e2e")][1:] == [CheckCode.E2E_ANSWERS_UNREFERENCED]
    assert decode(E2EProbe, encode(probe)) == probe  # stored and read back as it was


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("args", "limit"),
    [((), None), (("--context-length", "4096", "--max-total-tokens", "3000"), 3000 - 1 - 5)],
    ids=["default", "small-pool"],
)
async def test_a_healthy_stack_passes_with_the_long_prompt_sized_from_its_limit(
    tmp_path: Path, args: Sequence[str], limit: int | None
) -> None:
    stack = _stack(args=args)
    try:
        report = await _verify(tmp_path, stack)
    finally:
        stack.stop()
    check, probe = _probe(report)
    assert report.ok, render_verify(report)
    assert check.code is CheckCode.E2E_PASSED
    long = probe.long
    assert long is not None and long.status == 200 and (long.completion_tokens or 0) > 0
    assert {x.service for x in long.limits} == {"prefill", "decode"}
    assert all(x.field == "max_req_input_len" and x.tokens for x in long.limits)
    want = LONG_PROMPT_CAP if limit is None else limit - TEMPLATE_HEADROOM
    assert long.size == want and (long.prompt_tokens or 0) > want - 32
    assert f"long prompt {long.prompt_tokens:,} tokens" in check_detail(check)
    if limit is not None:
        assert min(x.tokens or 0 for x in long.limits) == limit
        assert f"sized from prefill's max_req_input_len {limit:,}" in check_detail(check)


def test_the_probe_is_bounded_only_where_no_restart_came_before_it() -> None:
    """``case test``'s arms (a co-restart first) bound the long prompt only: the probe pays the
    cold start; ``investigate``'s localizing verification (``warm``) bounds both; a plain verify
    (ab/tune arms) bounds neither; never more than 120 s."""
    soak = Deadlines(idle_s=1.5)
    arm = bounded_by(soak)
    assert (arm.timeout_s, arm.long_timeout_s, arm.probe_timeout_s) == (120.0, 12.0, None)
    warm = bounded_by(soak, warm=True)
    assert (warm.timeout_s, warm.long_timeout_s, warm.probe_timeout_s) == (120.0, 12.0, 12.0)
    assert bounded_by(Deadlines(idle_s=600.0), warm=True).probe_timeout_s == 120.0
    plain = E2EOptions()
    assert (plain.long_timeout_s, plain.probe_timeout_s) == (None, None)
