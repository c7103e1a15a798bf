"""Pure parts of the simulator: text, protocol parsing/rendering, faults, settings, metrics."""

from __future__ import annotations

import json

import pytest

from servelab.core.knobs.rules import ENV_ALLOW_LIST
from servelab.errors import SimError
from servelab.sim.faults import ENV_VARS, AbortTracker, Faults, parse_flag, parse_wedge
from servelab.sim.metrics import WorkerMetrics
from servelab.sim.protocol import (
    _LONG_DIGITS,
    GenRequest,
    RequestError,
    decode_body,
    final_body,
    parse_request,
)
from servelab.sim.proxyfaults import PROXY_ENV_VARS
from servelab.sim.settings import load_settings
from servelab.sim.text import count_tokens, plan_output
from servelab.sim.tokenevent import stream_token, token_frame

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]


def test_tokenizer_counts_words_and_punctuation() -> None:
    assert count_tokens("Hello, world!") == 4
    assert count_tokens("") == 0


def test_output_is_deterministic_per_seed_and_prompt() -> None:
    a = plan_output(0, "hi", 16)
    assert a == plan_output(0, "hi", 16)
    assert a != plan_output(1, "hi", 16)
    assert len(a.pieces) == 16
    assert plan_output(0, "hi", 32).pieces[:16] == a.pieces  # a prefix of a longer answer


def test_tool_calls_are_well_formed_some_of_the_time() -> None:
    outs = [plan_output(0, f"prompt {i}", 64, tools=TOOLS) for i in range(30)]
    calls = [o for o in outs if o.tool_name is not None]
    assert 0 < len(calls) < 30
    for o in calls:
        assert o.tool_name == "get_weather"
        assert isinstance(json.loads(o.text), dict)
        assert o.finish_reason == "tool_calls"
        assert len(o.pieces) <= 64
    broken = plan_output(0, calls[0].pieces[0] and "prompt 0", 64, tools=TOOLS, corrupt=True)
    if broken.tool_name is not None:
        with pytest.raises(json.JSONDecodeError):
            json.loads(broken.text)


def _chat(**extra: object) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi there"}], **extra}


def test_parse_chat_with_rooms_and_n() -> None:
    req = parse_request("chat", _chat(n=2, bootstrap_room=[5, 6], bootstrap_port=9), "srv")
    assert isinstance(req, GenRequest)
    assert [i.room for i in req.items] == [5, 6]
    assert [i.bootstrap_port for i in req.items] == [9, 9]
    assert req.items[0].max_tokens == 128


@pytest.mark.parametrize(
    ("api", "body"),
    [
        ("chat", []),
        ("chat", {"messages": []}),
        ("chat", {"messages": [{"content": "x"}]}),
        ("chat", _chat(max_tokens="ten")),
        ("chat", _chat(max_tokens=0)),
        ("chat", _chat(stream="yes")),
        ("chat", _chat(n=2, bootstrap_room=[1])),
        ("chat", _chat(bootstrap_room="abc")),
        ("completions", {"prompt": 3}),
        ("generate", {"text": "x", "sampling_params": []}),
    ],
)
def test_malformed_requests_are_rejected(api: str, body: object) -> None:
    assert isinstance(parse_request(api, body, "srv"), RequestError)  # type: ignore[arg-type]


def test_batch_generate_and_render() -> None:
    req = parse_request(
        "generate", {"text": ["a b", "c"], "sampling_params": {"max_new_tokens": 3}}, "m"
    )
    assert isinstance(req, GenRequest) and req.batch and len(req.items) == 2
    outs = [plan_output(0, i.prompt, 3) for i in req.items]
    body = final_body(req, outs, [3, 3], "rid", 0)
    assert isinstance(body, list) and body[1]["meta_info"]["completion_tokens"] == 3
    event = stream_token(req, req.items[0], outs[0], 1, "rid", 0)
    assert json.loads(event[6:])["text"] == "".join(outs[0].pieces[:2])


def test_chat_final_body_has_usage() -> None:
    req = parse_request("chat", _chat(max_tokens=4), "m")
    assert isinstance(req, GenRequest)
    body = final_body(req, [plan_output(0, "x", 4)], [4], "rid", 0)
    assert body["usage"]["completion_tokens"] == 4
    assert body["usage"]["prompt_tokens"] == req.items[0].prompt_tokens


def test_faults_from_env_and_updates() -> None:
    f = Faults.from_env(
        {"SERVELAB_SIM_ABORT_WEDGE": "3/10", "SERVELAB_SIM_TRANSFER_FAIL_PROB": "1"}
    )
    assert f.abort_wedge == (3, 10.0) and f.transfer_fails(0.99)
    assert not Faults().transfer_fails(0.0)
    assert f.updated({"abort_wedge": None}).abort_wedge is None
    assert Faults(corrupt_under_load=4).corrupts(5) and not Faults(corrupt_under_load=4).corrupts(4)
    for bad in ({"nope": 1}, {"transfer_fail_prob": 2}, {"abort_wedge": "x"}):
        with pytest.raises(SimError):
            Faults().updated(bad)
    assert parse_wedge("off") is None


def test_issue9_fault_switches_from_env_and_updates() -> None:
    env = {
        "SERVELAB_SIM_WEDGE": "1",
        "SERVELAB_SIM_NO_METRICS": "true",
        "SERVELAB_SIM_TRANSFER_FAIL_OVER_TOKENS": "100",
        "SERVELAB_SIM_FAIL_FAST_S": "30",
    }
    f = Faults.from_env(env)
    assert f.wedge and f.no_metrics and f.fail_fast_s == 30.0
    assert f.transfer_fails(0.99, 101) and not f.transfer_fails(0.99, 100)
    assert Faults(transfer_fail_over_tokens=0).transfer_fails(0.99, 1)
    off = f.updated({"wedge": False, "no_metrics": None, "fail_fast_s": None})
    assert not off.wedge and not off.no_metrics and off.fail_fast_s == 0.0
    assert parse_flag("wedge", "off") is False and parse_flag("wedge", True) is True
    assert off.as_json()["transfer_fail_over_tokens"] == 100
    for bad in ({"wedge": "maybe"}, {"fail_fast_s": -1}, {"transfer_fail_over_tokens": -1}):
        with pytest.raises(SimError):
            Faults().updated(bad)


def test_every_fault_variable_is_allow_listed() -> None:
    names = set(ENV_VARS.values()) | set(PROXY_ENV_VARS.values())
    assert names <= set(ENV_ALLOW_LIST)


def test_abort_tracker_window() -> None:
    t = AbortTracker()
    assert not t.record(0.0, (3, 1.0))
    assert not t.record(5.0, (3, 1.0))
    assert not t.record(5.5, (3, 1.0))
    assert t.record(5.9, (3, 1.0))
    t.reset()
    assert not t.wedged


def test_settings_read_env_once_and_validate() -> None:
    env = {"SGLANG_SM120_MMA_TARGET_CTAS": "512", "SERVELAB_SIM_TIME_SCALE": "0.1"}
    s = load_settings("decode", env=env, overrides={"port": 1})
    assert s.target_ctas == 512 and s.time_scale == 0.1 and s.scaled(2.0) == pytest.approx(0.2)
    assert load_settings("decode", env={}).target_ctas == 256
    with pytest.raises(SimError):
        load_settings("decode", env={"SGLANG_SM120_MMA_TARGET_CTAS": "x"})
    with pytest.raises(SimError):
        load_settings("decode", env={}, overrides={"admin": True, "host": "0.0.0.0"})
    with pytest.raises(SimError):
        load_settings("prefill", env={})


def test_metrics_render_sglang_names() -> None:
    m = WorkerMetrics(model="m", engine_type="decode", transfer_failed=2)
    m.ttft.observe(0.25)
    text = m.render()
    # the scheduler's series carry its rank labels, the tokenizer's only the model and engine type
    scheduler = 'model_name="m",engine_type="decode",tp_rank="0",pp_rank="0",moe_ep_rank="0"'
    assert f"sglang:num_transfer_failed_reqs_total{{{scheduler}}} 2" in text
    tokenizer = 'model_name="m",engine_type="decode"'
    assert f'sglang:time_to_first_token_seconds_bucket{{{tokenizer},le="0.3"}} 1' in text
    assert "sglang:num_running_reqs" in text and "sglang:gen_throughput" in text


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_token_frame_matches_the_general_renderer(api: str) -> None:
    body = _chat() if api == "chat" else {"prompt": "p"}
    req = parse_request(api, body, "m")  # type: ignore[arg-type]
    assert isinstance(req, GenRequest)
    out = plan_output(3, 'quote " and \\ backslash', 8)
    frame = token_frame(req, req.items[0], out, "rid", 5)
    assert frame is not None
    for k, piece in enumerate(out.pieces):
        assert frame.event(piece) == stream_token(req, req.items[0], out, k, "rid", 5)
    pieces = [*out.pieces, "caf\u00e9 \u20ac", "", "\x00\n"]
    events = [frame.event(p) for p in pieces]
    assert frame.chunks(pieces, False) == events
    assert frame.chunks(pieces, True) == [b"%x\r\n%b\r\n" % (len(e), e) for e in events]
    tool_out = plan_output(0, "x", 8, tools=TOOLS)
    gen = parse_request("generate", {"text": "x"}, "m")
    assert isinstance(gen, GenRequest)
    assert token_frame(gen, gen.items[0], out, "rid", 5) is None
    if tool_out.tool_name is not None:
        assert token_frame(req, req.items[0], tool_out, "rid", 5) is None


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "m", "messages": [{"role": "user", "content": "caf\\u00e9 \xe2\x82\xac"}]}',
        b'{"bootstrap_room": 123456789012345678901234, "max_tokens": 18446744073709551616}',
        b'{"bootstrap_room": 9223372036854775807, "t": -0, "f": 1.5e3, "e": 0.1}',
        b'{"a": 9999999999999999999, "b": 18446744073709551615, "c": -9223372036854775808}',
        b'{"a": -9223372036854775809, "b": -9999999999999999999, "c": 99999999999999999999}',
        b'{"a": 0.12345678901234567890123, "b": 12345678901234567890e-5}',
        b'{"c": 1e-0000000000000000001, "d": -1234567890123456789.5}',
        b'{"temperature": NaN, "top_p": Infinity, "x": -Infinity}',
        b'{"content": "\\ud800 lone"}',
        b'{"a": 1, "a": 2}',
        b"[1, 2, 3]",
        b"\xef\xbb\xbf{}",
        b'"text"',
    ],
)
def test_a_body_decodes_as_the_standard_library_decodes_it(raw: bytes) -> None:
    got, want = decode_body(raw), json.loads(raw)
    assert repr(got) == repr(want)  # NaN too, and ints stay ints


def test_a_bootstrap_rooms_19_digits_stay_on_the_fast_decoder() -> None:
    """A room id is a random 63-bit number: 19 digits nine times in ten, all of which orjson
    reads as json does (below 10**19 < 2**64); only what it may read as a float goes to json."""
    assert _LONG_DIGITS.search(b'{"bootstrap_room": 9223372036854775807}') is None
    assert _LONG_DIGITS.search(b'{"bootstrap_room": 1000000000000000000}') is None
    assert _LONG_DIGITS.search(b'{"a": 18446744073709551616}') is not None
    assert _LONG_DIGITS.search(b'{"a": -9223372036854775809}') is not None


@pytest.mark.parametrize("raw", [b"{", b"", b"\xff\xfe{", b'{"a": 1}x'])
def test_a_bad_body_raises_what_the_standard_library_raises(raw: bytes) -> None:
    with pytest.raises(ValueError) as ours:
        decode_body(raw)
    with pytest.raises(ValueError) as theirs:
        json.loads(raw)
    assert type(ours.value) is type(theirs.value)
