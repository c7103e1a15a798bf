"""A non-streamed replay is judged by a deadline from its expected answer, not by the stream's
idle timeout: through the real router and the simulated pair, slow enough that a whole answer
takes longer than the idle timeout while every stream keeps sending."""

from __future__ import annotations

import asyncio
import time

from servelab.core.soak.body import ChatBody
from servelab.core.soak.clock import Clock, measured_rate
from servelab.core.soak.replay import Payload, Reason
from servelab.core.soak.signatures import Failure, Signature
from servelab.ops.soak.client import one_shot
from servelab.ops.soak.replay import replay_matrix
from servelab.sim.settings import ENV_WARMUP_S
from tests.support.soak import soak_targets
from tests.support.stack import sim_stack

IDLE_S = 1.0


def _body(model: str) -> ChatBody:
    return ChatBody.of(
        model=model,
        messages=[{"role": "user", "content": "write a long answer " * 20}],
        max_tokens=48,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )


def test_a_non_streamed_answer_slower_than_the_idle_timeout_is_not_a_failure() -> None:
    with sim_stack(time_scale=5.0, env={ENV_WARMUP_S: "0"}) as st:
        targets = soak_targets(st)
        body = _body("sim")
        measured = asyncio.run(one_shot(st.router_url, body, IDLE_S))
        assert measured.record.ok, measured.detail
        rate = measured_rate([measured.record])
        assert rate is not None
        failure = Failure(Signature.STALL_BODY, 0, 1, 2000, 0.0, 0)
        matrix = asyncio.run(
            replay_matrix(targets, failure, body, model="sim", idle_s=IDLE_S,
                          deadline=time.monotonic() + 60, rate=rate)
        )  # fmt: skip
    plain = [c for c in matrix.cells if not c.stream and c.payload == Payload.FAILING]
    assert plain and all(c.clock == Clock.DEADLINE and c.deadline_s for c in plain)
    assert all(c.ok for c in plain), plain
    assert max(c.elapsed_s for c in plain) > IDLE_S  # longer than the idle timeout, and fine
    assert matrix.layer is None and matrix.located.reason == Reason.NOT_REPRODUCED, matrix.located
    # without a measured rate the same cells have no deadline: undecided, never a failure
    with sim_stack(time_scale=5.0, env={ENV_WARMUP_S: "0"}) as st:
        blind = asyncio.run(
            replay_matrix(soak_targets(st), failure, body, model="sim", idle_s=IDLE_S,
                          deadline=time.monotonic() + 60)
        )  # fmt: skip
    cells = [c for c in blind.cells if not c.stream and c.payload == Payload.FAILING]
    assert cells and all(c.clock == Clock.UNDECIDED for c in cells), cells
    assert blind.layer is None, blind.located
