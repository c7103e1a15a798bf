"""Knobs as the engines' parsers read them: names, command lines, edits."""

from __future__ import annotations

import pytest

from servelab.core.engines import SGLANG, VLLM
from servelab.core.knob import OFF, ON, KnobKind, parse_knob, same_value
from servelab.core.knobs.argv import arg_values, knob_value, set_words
from servelab.errors import KnobError

SG_LINE = ["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--port=30002",
           "--max-running-requests", "32", "--disable-overlap-schedule",
           "--json-model-override-args", '{"index_topk":1024,"x":{"y":1}}',
           "--max-running-requests=64", "--mem-fraction-static", "0.85"]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "kind", "arg", "keys"),
    [
        ("SGLANG_SM120_MMA_TARGET_CTAS", KnobKind.ENV, None, ()),
        ("--max-running-requests", KnobKind.ARG, "--max-running-requests", ()),
        ("--disable-overlap-schedule", KnobKind.FLAG, "--disable-overlap-schedule", ()),
        ("--enable-cache-report", KnobKind.FLAG, "--enable-cache-report", ()),
        ("--json-model-override-args.index_topk", KnobKind.JSON_KEY,
         "--json-model-override-args", ("index_topk",)),
        ("--kv-transfer-config.kv_role", KnobKind.JSON_KEY, "--kv-transfer-config", ("kv_role",)),
    ],
)  # fmt: skip
def test_a_knob_is_named_as_an_operator_writes_it(name, kind, arg, keys) -> None:
    knob = parse_knob(name, SGLANG)
    assert (knob.kind, knob.arg, knob.keys) == (kind, arg, keys)


def test_a_listed_boolean_is_a_flag_whatever_its_name() -> None:
    assert parse_knob("--trust-remote-code", SGLANG).kind is KnobKind.FLAG
    assert parse_knob("--enforce-eager", VLLM).kind is KnobKind.FLAG
    assert parse_knob("--enforce-eager", SGLANG).kind is KnobKind.ARG


@pytest.mark.parametrize("bad", ["-x", "--", "--a b", "9LIVES", "--x.", "--x.a b", "a-b"])
def test_anything_else_is_refused_saying_what_a_knob_is(bad: str) -> None:
    with pytest.raises(KnobError, match="an argument --name"):
        parse_knob(bad)


def test_flag_values_read_on_and_off() -> None:
    knob = parse_knob("--disable-overlap-schedule")
    assert [knob.normalize(v) for v in ("on", "TRUE", "1", "off", "false", "no")] == [
        ON, ON, ON, OFF, OFF, OFF,
    ]  # fmt: skip
    with pytest.raises(KnobError, match="on or off"):
        knob.normalize("maybe")


def test_values_agree_as_numbers_too() -> None:
    assert same_value("0.85", "0.850") and same_value("64", "64.0")
    assert not same_value("64", "32") and not same_value(None, "64")
    # whole numbers compared exactly (as floats, 2**53 + 1 and 2**53 were one setting)
    assert not same_value("9007199254740993", "9007199254740992")
    assert same_value("064", "64") and same_value("9007199254740993", "09007199254740993")
    assert same_value(None, None) and same_value("fcfs", "fcfs")


def test_sglang_command_line_last_value_wins_and_flags_stand_alone() -> None:
    values = arg_values(SG_LINE, SGLANG)
    assert values["--max-running-requests"] == "64"
    assert values["--port"] == "30002" and values["--mem-fraction-static"] == "0.85"
    assert values["--disable-overlap-schedule"] == ON
    assert knob_value(values, parse_knob("--json-model-override-args.index_topk"), SGLANG) == "1024"
    assert knob_value(values, parse_knob("--json-model-override-args.x"), SGLANG) == '{"y":1}'
    assert knob_value(values, parse_knob("--json-model-override-args.z"), SGLANG) is None
    # absent store_true flag: off; absent argument: the engine's default (None)
    assert knob_value(values, parse_knob("--disable-radix-cache"), SGLANG) == OFF
    assert knob_value(values, parse_knob("--chunked-prefill-size"), SGLANG) is None


def test_vllm_reads_underscores_and_no_flags() -> None:
    line = ["vllm", "serve", "model", "--max_num_seqs", "128", "--no-enable-prefix-caching",
            "--max-num-seqs=256"]  # fmt: skip
    values = arg_values(line, VLLM)
    assert values["--max-num-seqs"] == "256"
    assert knob_value(values, parse_knob("--enable-prefix-caching", VLLM), VLLM) == OFF
    # an absent vLLM boolean is the engine's default, not off
    assert knob_value(values, parse_knob("--enable-chunked-prefill", VLLM), VLLM) is None


@pytest.mark.parametrize(
    ("words", "knob", "value", "engine", "expected"),
    [
        (["--a", "1", "--max-running-requests", "32", "--b"], "--max-running-requests", "64",
         SGLANG, ["--a", "1", "--max-running-requests", "64", "--b"]),
        (["--max-running-requests=32", "--a", "1", "--max-running-requests", "16"],
         "--max-running-requests", "64", SGLANG, ["--a", "1", "--max-running-requests", "64"]),
        (["--x=1", "--max-running-requests=32"], "--max-running-requests", "64", SGLANG,
         ["--x=1", "--max-running-requests=64"]),
        (["--a", "1"], "--max-running-requests", "64", SGLANG,
         ["--a", "1", "--max-running-requests", "64"]),
        (["--a", "1", "--max-running-requests", "64"], "--max-running-requests", None, SGLANG,
         ["--a", "1"]),
        (["--a", "1"], "--disable-overlap-schedule", "on", SGLANG,
         ["--a", "1", "--disable-overlap-schedule"]),
        (["--disable-overlap-schedule", "--a", "1"], "--disable-overlap-schedule", "off", SGLANG,
         ["--a", "1"]),
        (["--enable-prefix-caching"], "--enable-prefix-caching", "false", VLLM,
         ["--no-enable-prefix-caching"]),
        (["--no-enable-prefix-caching"], "--enable-prefix-caching", None, VLLM, []),
        (["--max_num_seqs", "8"], "--max-num-seqs", "16", VLLM, ["--max-num-seqs", "16"]),
        (["--json-model-override-args", '{"a":1}'], "--json-model-override-args.index_topk",
         "1024", SGLANG, ["--json-model-override-args", '{"a":1,"index_topk":1024}']),
        (["--json-model-override-args", '{"index_topk":1024}'],
         "--json-model-override-args.index_topk", None, SGLANG, []),
        ([], "--json-model-override-args.rope.type", "yarn", SGLANG,
         ["--json-model-override-args", '{"rope":{"type":"yarn"}}']),
    ],
)  # fmt: skip
def test_an_edit_gives_the_engine_the_value_and_keeps_every_other_word(
    words, knob, value, engine, expected
) -> None:
    k = parse_knob(knob, engine)
    edited = set_words(words, k, value, engine)
    assert edited == expected
    want = k.normalize(value)
    got = knob_value(arg_values(edited, engine), k, engine)
    assert got == want or (want is None and got == OFF and not engine.negatable_flags)


def test_a_json_key_of_an_argument_that_holds_no_json_is_refused() -> None:
    k = parse_knob("--json-model-override-args.index_topk")
    with pytest.raises(KnobError, match="does not hold JSON"):
        set_words(["--json-model-override-args", "{oops"], k, "1", SGLANG)
