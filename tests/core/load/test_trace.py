"""The Mooncake trace format: lines to conversations, the window, the replay's offsets, prompts
whose equal ids are equal prefixes, and the seeded sample traces (the shipped one included)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import orjson
import pytest

from servelab.core.ledger.codec import encode
from servelab.core.load.trace import (
    PromptBuilder,
    TracePlan,
    TraceReader,
    TraceSession,
    TraceTurn,
    TraceWindow,
    check_replay,
    replay_seconds,
    session_offsets_ns,
)
from servelab.core.load.tracegen import (
    AgenticShape,
    ChatShape,
    TraceEntry,
    agentic_trace,
    chat_trace,
    check_arrivals,
)
from servelab.errors import TraceError
from tests.support import REPO


def _json(entries: Iterator[TraceEntry]) -> list[dict[str, Any]]:
    """The generated entries as the trace's lines hold them."""
    return [encode(entry) for entry in entries]


def _read(lines: list[dict[str, object] | str]) -> list[TraceSession]:
    reader = TraceReader()
    out: list[TraceSession] = []
    for line in lines:
        out += reader.feed(line if isinstance(line, str) else json.dumps(line))
    return out + reader.flush()


def test_lone_requests_and_conversations_come_out_whole_in_file_order() -> None:
    got = _read([
        {"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]},
        {"session_id": "a", "timestamp": 5, "input_length": 20, "output_length": 3},
        {"session_id": "a", "delay": 1500, "input_length": 30, "output_length": 4,
         "hash_ids": [7, 8]},
        "",
        {"timestamp": 9.5, "input_length": 1},
    ])  # fmt: skip
    assert [(s.session, s.start_ms, len(s.turns), s.ordinal, s.line) for s in got] == [
        (None, 0.0, 1, 0, 1),
        ("a", 5.0, 2, 1, 2),
        (None, 9.5, 1, 2, 5),
    ]
    assert got[1].turns[1] == TraceTurn(30, 4, (7, 8), 1500.0)
    assert got[2].turns[0].output_length == 1  # absent: one token


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["{not json"], "line 1: not a JSON object"),
        (["[1, 2]"], "line 1: not a JSON object"),
        ([{"input_length": 3}], "line 1: the first turn of a request needs a timestamp"),
        ([{"timestamp": 0}], "line 1: input_length"),
        ([{"timestamp": 0, "input_length": 2.5}], "line 1: input_length must be a whole"),
        ([{"timestamp": 0, "input_length": 0}], "line 1: input_length must be .* ≥ 1, got 0$"),
        ([{"timestamp": 0, "input_length": -3}], "line 1: input_length must be .* ≥ 1, got -3$"),
        # the thirty-second pass: these said "≥ 0" though 0 is refused too
        ([{"timestamp": 0, "input_length": 0.0}], "whole number ≥ 1, got 0.0$"),
        ([{"timestamp": 0, "input_length": True}], "whole number ≥ 1, got True$"),
        ([{"timestamp": 0, "input_length": 1e308}], "whole number ≥ 1, got 1e"),
        ([{"timestamp": -1, "input_length": 2}], "line 1: timestamp must be a number ≥ 0"),
        ([{"timestamp": 0, "input_length": 2, "hash_ids": ["x"]}], "line 1: hash_ids"),
        ([{"session_id": "a", "timestamp": 0, "input_length": 2},
          {"session_id": "b", "timestamp": 1, "input_length": 2},
          {"session_id": "a", "delay": 0, "input_length": 2}], "line 3: the turns of session 'a'"),
    ],
)  # fmt: skip
def test_what_is_not_a_trace_entry_is_refused_by_its_line(
    lines: list[dict[str, object] | str], message: str
) -> None:
    with pytest.raises(TraceError, match=message):
        _read(lines)


def test_the_window_and_the_offsets_sped_up() -> None:
    sessions = _read([{"timestamp": t, "input_length": 1} for t in (1000, 3000, 2500, 9000)])
    window = TraceWindow(2.0, 9.0)
    held = [s for s in sessions if window.holds(s)]
    assert [s.start_ms for s in held] == [3000, 2500]
    offsets = list(session_offsets_ns(iter(sessions), speedup=2.0))
    # a start earlier than the one before goes with it: the replay never goes back in time
    assert [o for o, _ in offsets] == [0, 1_000_000_000, 1_000_000_000, 4_000_000_000]
    with pytest.raises(ValueError):
        TraceWindow(5.0, 5.0)


def test_equal_ids_are_equal_prefixes_and_a_prompt_has_its_length() -> None:
    build = PromptBuilder(block_size=4, seed=7)
    a = build.prompt(TraceTurn(10, 1, (1, 2, 3)), own=0).split()
    b = build.prompt(TraceTurn(9, 1, (1, 2, 9)), own=1).split()
    c = build.prompt(TraceTurn(6, 1, (1, 2, 3)), own=2).split()  # its last block cut
    tail = build.prompt(TraceTurn(11, 1, (1,)), own=3).split()  # ids run out: its own words
    assert (len(a), len(b), len(c), len(tail)) == (10, 9, 6, 11)
    assert a[:8] == b[:8] and a[8:] != b[8:9] + b[8:]  # blocks 1, 2 shared; 3 and 9 differ
    assert c == a[:6] and tail[:4] == a[:4]
    assert PromptBuilder(4, seed=7).prompt(TraceTurn(10, 1, (1, 2, 3)), own=0).split() == a
    assert PromptBuilder(4, seed=8).prompt(TraceTurn(10, 1, (1, 2, 3)), own=0).split() != a


def test_a_later_turn_starts_with_every_word_of_the_turn_before() -> None:
    build = PromptBuilder(block_size=4, seed=7)
    first = TraceTurn(6, 1, (1, 2))  # block 2 partial: 2 of its 4 words
    second = TraceTurn(11, 1, (1, 3, 4))  # block 3 rewrites it, with more words
    third = TraceTurn(12, 1, (1, 3, 5))  # block 3 whole again, as the second turn had it
    a = build.prompt(first, own=0).split()
    b = build.prompt(second, own=1, before=first).split()
    c = build.prompt(third, own=2, before=second).split()
    assert b[:6] == a and c[:8] == b[:8] and len(b) == 11
    plain = PromptBuilder(block_size=4, seed=7)  # without the turn before: only whole blocks
    assert plain.prompt(second, own=1).split()[:6] != a
    assert plain.prompt(first, own=0).split() == a  # a first turn is built as it always was
    # a turn that ended on a block's edge, or a lone request, carries nothing over
    edge = PromptBuilder(block_size=4, seed=7)
    x = edge.prompt(TraceTurn(8, 1, (1, 2)), own=0).split()
    y = edge.prompt(TraceTurn(10, 1, (1, 2, 6)), own=1, before=TraceTurn(8, 1, (1, 2))).split()
    assert (
        y[:8] == x
        and y[8:] == PromptBuilder(4, seed=7).prompt(TraceTurn(4, 1, (6,)), 0).split()[:2]
    )


def test_an_agentic_trace_resends_its_history_and_waits_for_its_tools() -> None:
    shape = AgenticShape(sessions=5, turns=(3, 6), block_size=64)
    entries = _json(agentic_trace(shape, seed=3))
    assert entries == _json(agentic_trace(shape, seed=3))  # seeded
    sessions = _read(entries)
    assert len(sessions) == 5 and [s.start_ms for s in sessions] == sorted(
        s.start_ms for s in sessions
    )
    system = list(range(shape.system_blocks))
    for s in sessions:
        assert 3 <= len(s.turns) <= 6
        for before, after in zip(s.turns, s.turns[1:], strict=False):
            full = before.input_length // 64
            assert after.hash_ids[:full] == before.hash_ids[:full]  # the history's blocks kept
            assert after.input_length > before.input_length + before.output_length
            assert after.delay_ms > 0
        assert list(s.turns[0].hash_ids[: shape.system_blocks]) == system  # shared by all
        for t in s.turns:
            assert len(t.hash_ids) == -(-t.input_length // 64)


def test_a_chat_trace_is_a_long_tailed_time_ordered_mix() -> None:
    entries = _json(chat_trace(ChatShape(requests=400), seed=1))
    stamps = [e["timestamp"] for e in entries]
    assert stamps == sorted(stamps) and len(entries) == 400
    inputs = sorted(int(str(e["input_length"])) for e in entries)
    assert inputs[-1] > 4 * inputs[len(inputs) // 2]  # a long tail
    shared = [e for e in entries if e["hash_ids"][0] < 16]  # type: ignore[index]
    assert 0.3 < len(shared) / len(entries) < 0.7


def test_the_shipped_trace_is_the_generators_default_agentic_trace() -> None:
    """``servelab trace generate agentic -o examples/traces/agentic.jsonl`` wrote it."""
    shipped = (REPO / "examples" / "traces" / "agentic.jsonl").read_bytes().splitlines()
    assert shipped == [orjson.dumps(e) for e in _json(agentic_trace(AgenticShape(), seed=0))]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([{"timestamp": 0, "input_length": 1_000_000_000}],
         "line 1: input_length 1,000,000,000 is over 16,777,216 tokens"),
        ([{"timestamp": 0, "input_length": 5, "output_length": 1 << 30}],
         "line 1: output_length 1,073,741,824 is over"),
        ([{"timestamp": 1e308, "input_length": 5}], "line 1: timestamp 1e[+]308 is over"),
        ([{"session_id": "a", "timestamp": 0, "input_length": 2},
          {"session_id": "a", "delay": 1e300, "input_length": 2}], "line 2: delay 1e[+]300"),
    ],
)  # fmt: skip
def test_lengths_and_instants_past_their_caps_are_refused_by_their_line(
    lines: list[dict[str, object] | str], message: str
) -> None:
    """Defects 7 and 13 (issue 38): a line with input_length 10^9 grew bench to 18.9 GB while it
    built the prompt; a timestamp of 1e308 ended in "unexpected OverflowError"; a delay of 1e300
    waited forever. Each is refused as it is read, naming its line."""
    with pytest.raises(TraceError, match=message):
        _read(lines)


def test_a_replay_longer_than_its_cap_is_refused() -> None:
    """Defects 13 and 19 (issue 38): --speedup 1e-300 (or a trace spanning decades) waited
    forever; the replay's span over its speedup is capped at a week."""
    check_replay(3_600_000.0, 1.0)  # an hour at 1x
    check_replay(30 * 86_400_000.0, 10.0)  # a month 10x as fast: 3 days
    with pytest.raises(TraceError, match="over the 7-day cap"):
        check_replay(54_000.0, 1e-300)
    with pytest.raises(TraceError, match="over the 7-day cap"):
        check_replay(1e12, 1.0)
    with pytest.raises(TraceError, match="raise --speedup or") as refused:  # the option's name
        check_replay(54_000.0, 1e-300)
    assert "--trace-speedup" not in str(refused.value)
    assert replay_seconds(1000.0, 2.0) == 0.5
    with pytest.raises(ValueError, match="finite"):
        TracePlan("t.jsonl", speedup=math.inf)


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_line() -> None:
    """Defect 20 (issue 38): a trace saved with a UTF-8 BOM was "line 1: not a JSON object"."""
    line = b'{"timestamp": 0, "input_length": 3}'
    for first in (b"\xef\xbb\xbf" + line, "\ufeff" + line.decode()):
        reader = TraceReader()
        (session,) = reader.feed(first)
        assert session.turns[0].input_length == 3
    reader = TraceReader()
    reader.feed(line)
    with pytest.raises(TraceError, match="line 2: not a JSON object"):
        reader.feed(b"\xef\xbb\xbf" + line)  # only the file's start may carry one


def test_generated_arrivals_are_refused_past_what_a_trace_may_span() -> None:
    """Defect 13 (issue 38): trace generate --rate 1e-300 died of "Integer exceeds 64-bit
    range" writing its timestamps."""
    check_arrivals(200, 4.0)
    check_arrivals(8, 1e-6)  # 81 days between sessions: a long trace, still a trace
    with pytest.raises(TraceError, match="--rate 1e-300: 8 arrivals"):
        check_arrivals(8, 1e-300)
    # a span past what a float holds is said as such (the thirteenth pass: "about inf s")
    with pytest.raises(TraceError, match="span more than 1e308 s of trace time") as refused:
        check_arrivals(8, 1e-308)
    assert "inf" not in str(refused.value)


def test_a_trace_recorded_on_whole_seconds_starts_its_arrivals_in_bursts() -> None:
    shape = AgenticShape(sessions=40, rate=12.0, turns=(1, 2), resolution_ms=1000)
    starts = [e["timestamp"] for e in _json(agentic_trace(shape, seed=0)) if "timestamp" in e]
    assert len(starts) == 40 and all(t % 1000 == 0 for t in starts) and starts == sorted(starts)
    assert max(starts.count(t) for t in set(starts)) >= 8  # ~12 a second: bursts
    finer = _json(agentic_trace(replace(shape, resolution_ms=1), seed=0))
    fine = [e["timestamp"] for e in finer if "timestamp" in e]
    assert [t // 1000 * 1000 for t in fine] == starts  # the same arrivals, rounded down
    chats = _json(chat_trace(ChatShape(requests=50, resolution_ms=500), seed=1))
    chat = [e["timestamp"] for e in chats]
    assert all(t % 500 == 0 for t in chat) and len(set(chat)) < len(chat)


def test_a_generated_traces_hash_ids_are_bounded_before_any_line() -> None:
    """The sixteenth pass (issue 38): ``--block-size 1`` within the request cap (a hash id per
    token) could write ~28 GB; the bound is on requests × the blocks of their prompt cap."""
    from servelab.core.load.tracegen import MAX_GENERATED_HASH_IDS, check_hash_ids

    check_hash_ids("--requests", 200, 1, 16_384)  # the default chat mix: a hash id per token
    check_hash_ids("--sessions", 1_000_000, 512, 65_536)  # the request cap at the default size
    check_hash_ids("--requests", MAX_GENERATED_HASH_IDS, 16_384, 16_384)  # exactly at the cap
    with pytest.raises(TraceError, match=r"--block-size 1: 1,000,000 requests of up to 65,536"):
        check_hash_ids("--sessions", 1_000_000, 1, 65_536)
    with pytest.raises(TraceError, match="raise --block-size or lower --requests"):
        check_hash_ids("--requests", MAX_GENERATED_HASH_IDS + 1, 16_384, 16_384)
