"""The seeded probe set: the same seed gives the same probes, sizes checked against the context
length, bodies greedy and seeded, the retrieval key at its depth; a run's probes within 5%."""

from __future__ import annotations

import json

import pytest

from servelab.core.answers.contract import (
    MAX_SHARE,
    AnswersConfig,
    State,
    probe_positions,
    probes_for_round,
    probes_per_run,
    state_key,
)
from servelab.core.answers.probes import (
    PASS_KEY_QUESTION,
    ProbeKind,
    probe_body,
    probe_set,
    retrieval_tokens,
)


def test_the_set_is_seeded_and_mixes_the_three_kinds() -> None:
    first, again, other = probe_set(0, 24, 32768), probe_set(0, 24, 32768), probe_set(1, 24, 32768)
    assert first == again and first != other
    assert [p.kind for p in first[:3]] == [ProbeKind.PLAIN, ProbeKind.TOOL, ProbeKind.RETRIEVAL]
    assert probe_set(0, 6, 32768) == first[:6]  # probe i does not depend on the set's size


def test_a_retrieval_probe_holds_its_key_at_its_depth_and_asks_last() -> None:
    probe = probe_set(3, 3, 32768)[2]
    assert probe.key is not None and probe.depth is not None and len(probe.key) == 6
    context = probe.messages[0][1]
    needle = f"The pass key is {probe.key}."
    assert context.count(needle) == 1
    share = context.index(needle) / len(context)
    assert abs(share - probe.depth) < 0.05
    assert probe.messages[-1] == ("user", PASS_KEY_QUESTION)


def test_sizes_are_checked_against_the_context_length() -> None:
    assert retrieval_tokens(163_840) == 4096 and retrieval_tokens(2048) == 409
    with pytest.raises(ValueError, match="too short"):
        probe_set(0, 3, 256)
    probe = probe_set(0, 3, 2048)[2]
    assert probe.prompt_tokens + probe.max_tokens < 2048


def test_bodies_are_greedy_seeded_streamed_and_carry_the_schema() -> None:
    tool = probe_set(0, 2, 4096)[1]
    body = json.loads(probe_body(tool, "m"))
    assert body["temperature"] == 0 and body["seed"] == 1234 and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["logprobs"] is True and body["top_logprobs"] >= 1
    (spec,) = body["tools"]
    assert spec["function"]["parameters"]["type"] == "object"
    assert "logprobs" not in json.loads(probe_body(tool, "m", logprobs=False))


def test_a_run_carries_at_most_five_percent_probes_placed_in_its_steady_middle() -> None:
    for requests in (1, 18, 19, 64, 100, 256, 400, 10_000):
        n = probes_per_run(requests, MAX_SHARE, 24)
        assert n / (n + requests) <= MAX_SHARE + 1e-12
    assert probes_per_run(18, MAX_SHARE, 24) == 0 and probes_per_run(19, MAX_SHARE, 24) == 1
    assert probes_per_run(10_000, MAX_SHARE, 24) == 24  # at most the set
    positions = probe_positions(300, 15, 64)
    assert len(positions) == 15 and min(positions) >= 64 and max(positions) < 300 - 64
    assert positions == sorted(positions)


def test_rounds_take_the_set_in_turn_and_keys_follow_the_state() -> None:
    probes = probe_set(0, 24, 32768)
    assert [p.id for p in probes_for_round(probes, 10, 0)] == list(range(10))
    assert [p.id for p in probes_for_round(probes, 10, 2)] == [20, 21, 22, 23, *range(6)]
    config = AnswersConfig()
    base = State("abc", (("decode", "K", "0"),))
    assert state_key(base, config, "m") == state_key(base, config, "m")
    assert state_key(base, config, "m") != state_key(State("abc", (("decode", "K", "1"),)),
                                                     config, "m")  # fmt: skip
    with pytest.raises(ValueError, match="at most 5%"):
        AnswersConfig(share=0.1)
