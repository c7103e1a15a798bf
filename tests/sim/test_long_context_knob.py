"""The guilty knob: a pinned MLA KV tile makes long prompts hang in decode; reverting it cures.

Through the real sglang-router: with ``SGLANG_SM120_MLA_KV_TILE=32`` (32 x 64 splits = 2048
tokens) a short prompt is answered, a 3000-token prompt gets the role chunk and then nothing
(streaming) or nothing at all (non-streaming) while ``/health`` stays 200; after a restart with
the knob unset (auto) the same long prompt is answered.
"""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import urlsplit

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_SPEC_TOML
from servelab.core.deploy.spec import parse_spec
from servelab.core.knobs.rules import ENV_ALLOW_LIST, check_knob_name
from servelab.sim.profile import DEFAULT_PROFILE, mla_stall_above
from servelab.sim.settings import load_settings
from tests.support.http import get_json, get_status, metric, post, sse_events
from tests.support.stack import sim_stack

KNOB = DEFAULT_PROFILE.mla_tile_knob_name
LONG = " ".join(["word"] * 3000)  # 3000 tokens for the sim's word tokenizer


def chat(prompt: str, **extra: object) -> dict[str, object]:
    return {"model": "sim", "messages": [{"role": "user", "content": prompt}], **extra}


def test_the_knob_is_discoverable_and_pure() -> None:
    assert KNOB == "SGLANG_SM120_MLA_KV_TILE" and KNOB in ENV_ALLOW_LIST
    spec = parse_spec(DEFAULT_SPEC_TOML, source="default")
    assert check_knob_name(spec, "decode", KNOB) is spec.service("decode")  # knob set can act
    assert mla_stall_above(DEFAULT_PROFILE, 0) is None  # auto never stalls
    assert mla_stall_above(DEFAULT_PROFILE, 32) == 2048
    settings = load_settings("decode", env={KNOB: "32"})
    assert settings.knobs()[KNOB] == 32
    assert settings.decode_stalls(2049) and not settings.decode_stalls(2048)
    assert not load_settings("decode", env={}).decode_stalls(10**6)


def _stream_until_quiet(base: str, body: dict[str, object], quiet: float) -> bytes:
    """POST a streaming request; return what arrived before ``quiet`` seconds without bytes."""
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=quiet)
    got = b""
    try:
        headers = {"Content-Type": "application/json"}
        conn.request("POST", "/v1/chat/completions", json.dumps(body), headers)
        resp = conn.getresponse()
        assert resp.status == 200
        while chunk := resp.read1(65536):
            got += chunk
    except TimeoutError:
        return got
    finally:
        conn.close()
    raise AssertionError(f"the stream ended instead of hanging: {got[-200:]!r}")


def test_pinned_tile_hangs_long_prompts_only_and_revert_cures() -> None:
    env = {"SERVELAB_SIM_WARMUP_S": "0"}
    with sim_stack(time_scale=0.05, env=env, decode_env={KNOB: "32"}) as st:
        chat_url = st.router_url + "/v1/chat/completions"
        status, raw = post(chat_url, chat("short prompt", max_tokens=8))
        assert status == 200 and json.loads(raw)["usage"]["completion_tokens"] == 8
        got = _stream_until_quiet(st.router_url, chat(LONG, max_tokens=8, stream=True), 3.0)
        events = sse_events(got)
        assert events and all(not e["choices"][0]["delta"].get("content") for e in events)
        assert events[0]["choices"][0]["delta"].get("role") == "assistant"
        with pytest.raises(TimeoutError):
            post(chat_url, chat(LONG, max_tokens=8), timeout=3)
        assert get_status(st.decode_url + "/health") == 200
        info = get_json(st.decode_url + "/server_info")["servelab"]
        assert info["knobs"][KNOB] == 32 and info["wedged"] is False
        assert metric(st.decode_url, "sglang:num_running_reqs") >= 1  # stuck in the batch
        status, _ = post(chat_url, chat("short again", max_tokens=4))
        assert status == 200  # short prompts still work alongside the stuck ones
        st.restart_workers()  # the knob back to auto: env file reverted + restart
        t0 = time.monotonic()
        status, raw = post(chat_url, chat(LONG, max_tokens=8), timeout=30)
        assert status == 200 and json.loads(raw)["usage"]["completion_tokens"] == 8
        assert time.monotonic() - t0 < 30
        info = get_json(st.decode_url + "/server_info")["servelab"]
        assert info["knobs"][KNOB] == 0 and info["stalled"] == 0
