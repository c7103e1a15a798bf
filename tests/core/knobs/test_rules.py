"""Knob rules, pure: verdicts, names that may be read, backup names, a parse that never echoes."""

from __future__ import annotations

import pytest

from servelab.core.deploy.spec import DeploymentSpec, parse_spec
from servelab.core.knobs import rules as knobs
from servelab.core.knobs.rules import (
    ENV_ALLOW_LIST,
    LiveVerdict,
    backup_names,
    check_knob_name,
    live_verdict,
    parse_env_bytes,
    tracked_names,
)
from servelab.errors import KnobError

KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"


def _spec() -> DeploymentSpec:
    return parse_spec(
        f"""
[services.decode]
role = "generic"
url = "http://127.0.0.1:1"
start = "true"
knobs = ["{KNOB}", "OTHER_KNOB"]
"""
    )


def test_live_verdicts() -> None:
    assert live_verdict("1", "1") == LiveVerdict.MATCH
    assert live_verdict(None, None) == LiveVerdict.UNSET
    assert live_verdict("1", None) == LiveVerdict.RESTART_NEEDED
    assert live_verdict(None, "1") == LiveVerdict.LOST_ON_RESTART
    assert live_verdict("1", "2") == LiveVerdict.DIFFERS
    assert {v for v in LiveVerdict if v.ok} == {LiveVerdict.MATCH, LiveVerdict.UNSET}
    assert [v.value for v in LiveVerdict] == [  # stored in the ledger: the values never change
        "match", "unset", "restart_needed", "lost_on_restart", "differs"
    ]  # fmt: skip


def test_tracked_names_are_declared_then_allow_listed_in_file() -> None:
    svc = _spec().service("decode")
    in_file = ["SERVELAB_SIM_TIME_SCALE", "SECRET_TOKEN", KNOB]
    assert tracked_names(svc, in_file) == [KNOB, "OTHER_KNOB", "SERVELAB_SIM_TIME_SCALE"]


def test_backup_names_sort_by_time_and_ignore_others() -> None:
    names = [
        "decode.env",
        "decode.env.bak-20260101T000000.000002Z",
        "decode.env.bak-20251231T235959.999999Z",
        "decode.env.bak-junk",
        "prefill.env.bak-20260101T000000.000001Z",
    ]
    assert backup_names(names, "decode.env") == [
        "decode.env.bak-20251231T235959.999999Z",
        "decode.env.bak-20260101T000000.000002Z",
    ]


def test_only_declared_or_allow_listed_names_pass() -> None:
    spec = _spec()
    assert check_knob_name(spec, "decode", KNOB).knobs == {KNOB: None, "OTHER_KNOB": None}
    assert check_knob_name(spec, "decode", ENV_ALLOW_LIST[0]) is spec.service("decode")
    with pytest.raises(KnobError, match="not a declared knob of 'decode'"):
        check_knob_name(spec, "decode", "SECRET_TOKEN")


def test_parse_names_the_line_but_never_echoes_it() -> None:
    assert parse_env_bytes(f"# c\n{KNOB}=512\n".encode(), "d.env").get(KNOB) == "512"
    with pytest.raises(KnobError, match=r"^d.env:2: not a NAME=VALUE line") as info:
        parse_env_bytes(b"A=1\nSECRET_TOKEN hunter2\n", "d.env")
    assert "hunter2" not in str(info.value)


def test_public_api() -> None:
    for name in knobs.__all__:
        assert hasattr(knobs, name)
