"""--config YAML files, read and edited as each engine reads them."""

from __future__ import annotations

import pytest
import yaml

from servelab.core.engines import SGLANG, VLLM
from servelab.core.knob import OFF, ON, parse_knob
from servelab.core.knobs.argv import knob_value
from servelab.core.knobs.configfile import config_values, edit_config
from servelab.errors import KnobError

SG_FILE = """\
# decode engine settings
model-path: /models/dsv3
max-running-requests: 64  # tuned in the A/B
disable-overlap-schedule: true
enable-metrics: false
json-model-override-args: '{"index_topk": 1024}'
"""


def test_sglang_keys_become_arguments_false_is_dropped() -> None:
    values = config_values(SG_FILE, SGLANG)
    assert values["--max-running-requests"] == "64"
    assert values["--disable-overlap-schedule"] == ON
    assert "--enable-metrics" not in values
    topk = parse_knob("--json-model-override-args.index_topk")
    assert knob_value(values, topk, SGLANG) == "1024"
    assert knob_value(values, parse_knob("--enable-metrics"), SGLANG) == OFF


def test_vllm_takes_underscores_and_no_keys() -> None:
    text = "max_num_seqs: 128\nno-enable-prefix-caching: true\nkv-transfer-config:\n  a: 1\n"
    values = config_values(text, VLLM)
    assert values["--max-num-seqs"] == "128"
    assert values["--enable-prefix-caching"] == OFF
    assert values["--kv-transfer-config"] == '{"a":1}'


def test_an_edit_rewrites_one_key_and_keeps_comments_and_other_lines() -> None:
    out = edit_config(SG_FILE, parse_knob("--max-running-requests"), "32", SGLANG)
    assert out == SG_FILE.replace("requests: 64  #", "requests: 32  #")
    assert yaml.safe_load(out)["max-running-requests"] == 32


@pytest.mark.parametrize(
    ("knob", "value", "engine", "line", "absent"),
    [
        ("--disable-overlap-schedule", "off", SGLANG, None, "disable-overlap-schedule"),
        ("--disable-radix-cache", "on", SGLANG, "disable-radix-cache: true", None),
        ("--schedule-policy", "lpm", SGLANG, 'schedule-policy: "lpm"', None),
        ("--max-running-requests", None, SGLANG, None, "max-running-requests"),
        ("--json-model-override-args.index_topk", "2048", SGLANG,
         "json-model-override-args: '{\"index_topk\":2048}'", None),
        ("--enable-prefix-caching", "off", VLLM, "no-enable-prefix-caching: true", None),
    ],
)  # fmt: skip
def test_each_kind_of_knob_is_written_as_its_engine_reads_it(knob, value, engine, line, absent):
    k = parse_knob(knob, engine)
    out = edit_config(SG_FILE, k, value, engine)
    if line is not None:
        assert line in out.splitlines()
    if absent is not None:
        assert not any(x.startswith(absent + ":") for x in out.splitlines())
    want = k.normalize(value)
    got = knob_value(config_values(out, engine), k, engine)
    assert got == want or (want is None and got in (None, OFF))


def test_a_multi_line_value_is_refused_naming_the_line() -> None:
    text = "a: 1\nkv-transfer-config:\n  kv_role: kv_consumer\n"
    with pytest.raises(
        KnobError, match=r"decode.yaml:2: kv-transfer-config has a value on several"
    ):
        edit_config(
            text, parse_knob("--kv-transfer-config.kv_role", VLLM), "x", VLLM, "decode.yaml"
        )


@pytest.mark.parametrize(
    ("text", "line"),
    [("? max-running-requests\n: 32\n", 1), ("model: m\n?  max-running-requests\n:  32\n", 2),
     ("{max-running-requests: 32, model: m}\n", 1), ("? max-running\n: 32\n", 1),
     ("a: 1\n? 'max-running-requests'\n: 32\n", 2)],
    ids=["complex", "complex-after", "flow", "complex-abbreviated", "complex-quoted"],
)  # fmt: skip
def test_a_key_written_as_a_complex_key_or_in_a_flow_mapping_is_refused(
    text: str, line: int
) -> None:
    """The sixteenth pass (issue 38): ``? max-running-requests`` then ``: 32`` was left and a
    second ``max-running-requests: 48`` added; refused naming the file, the line and the key."""
    knob = parse_knob("--max-running-requests", SGLANG)
    flags = ["--max-running-requests", "--model-path"]
    with pytest.raises(KnobError) as refused:
        edit_config(text, knob, "48", SGLANG, "decode.yaml", flags)
    assert f"decode.yaml:{line}: max-running" in str(refused.value)
    assert "servelab does not edit" in str(refused.value)
    plain = "? model\n: m\nmax-running-requests: 32\n"  # another key's form is no matter
    assert edit_config(plain, knob, "48", SGLANG, "decode.yaml", flags).endswith("requests: 48\n")


def test_a_file_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(KnobError, match=r"c\.yaml: not a mapping"):
        config_values("- a\n- b\n", SGLANG, "c.yaml")
    with pytest.raises(KnobError, match=r"c\.yaml:2: not valid YAML"):
        config_values("a: [1\n", SGLANG, "c.yaml")
    assert config_values("", SGLANG) == {}
    assert edit_config("", parse_knob("--max-running-requests"), "8", SGLANG) == (
        "max-running-requests: 8\n"
    )


@pytest.mark.parametrize(
    ("held", "said"),
    [("'5'", "holds JSON that is not an object"), ("'x{'", "does not hold JSON")],
)
def test_a_json_valued_key_that_holds_no_json_object_is_refused_as_on_the_command_line(
    held: str, said: str
) -> None:
    """A JSON key is set inside the object its argument holds: a file's value that is no JSON
    object is refused the way the command line's is (it was replaced, or a bare decode error)."""
    knob = parse_knob("--speculative-config.num_speculative_tokens", VLLM)
    text = f"speculative-config: {held}\n"
    with pytest.raises(KnobError, match=said):
        edit_config(text, knob, "4", VLLM)
    edited = edit_config("speculative-config: '{\"a\": 1}'\n", knob, "4", VLLM)
    assert edited == 'speculative-config: \'{"a":1,"num_speculative_tokens":4}\'\n'
    assert edit_config(edited, knob, None, VLLM) == "speculative-config: '{\"a\":1}'\n"
