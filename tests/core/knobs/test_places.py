"""Where an argument knob's file value comes from, and where a set writes it."""

from __future__ import annotations

import pytest

from servelab.core.deploy.spec import ServiceSpec
from servelab.core.engines import SGLANG, VLLM
from servelab.core.knob import OFF, ON, parse_knob
from servelab.core.knobs.argv import arg_values
from servelab.core.knobs.configfile import config_values
from servelab.core.knobs.places import FileValue, Place, file_value, split_args, write_place
from servelab.errors import KnobError

MRR = parse_knob("--max-running-requests")
OVERLAP = parse_knob("--disable-overlap-schedule")


def _svc(**extra: object) -> ServiceSpec:
    return ServiceSpec.model_validate(
        {"role": "decode", "url": "http://127.0.0.1:1", "start": "sim", **extra}
    )


def test_the_command_line_wins_over_the_config_file_and_says_what_it_hides() -> None:
    sources = {
        Place.ARGS_ENV: arg_values(split_args("--max-running-requests 64 --x 1"), SGLANG),
        Place.CONFIG_FILE: config_values("max-running-requests: 32\n", SGLANG),
    }
    got = file_value(sources, MRR, SGLANG)
    assert got == FileValue("64", Place.ARGS_ENV, ((Place.CONFIG_FILE, "32"),))


def test_a_place_that_does_not_name_the_argument_leaves_it_to_the_next() -> None:
    sources = {
        Place.ARGS_ENV: arg_values(["--x", "1"], SGLANG),
        Place.SPEC: arg_values(["--max-running-requests", "16"], SGLANG),
        Place.CONFIG_FILE: config_values("disable-overlap-schedule: true\n", SGLANG),
    }
    assert file_value(sources, MRR, SGLANG) == FileValue("16", Place.SPEC)
    assert file_value(sources, OVERLAP, SGLANG) == FileValue(ON, Place.CONFIG_FILE)
    # named nowhere: a store_true flag is off, an argument the engine's default
    assert file_value({}, OVERLAP, SGLANG) == FileValue(OFF, None)
    assert file_value({}, MRR, SGLANG) == FileValue(None, None)


def test_vllm_no_flag_on_the_command_line_beats_the_file() -> None:
    knob = parse_knob("--enable-prefix-caching", VLLM)
    sources = {
        Place.ARGS_ENV: arg_values(["--no-enable-prefix-caching"], VLLM),
        Place.CONFIG_FILE: config_values("enable_prefix_caching: true\n", VLLM),
    }
    assert file_value(sources, knob, VLLM) == FileValue(
        OFF, Place.ARGS_ENV, ((Place.CONFIG_FILE, ON),)
    )


def test_a_set_writes_where_the_knob_is_else_args_env_else_the_config_file() -> None:
    both = _svc(env_file="d.env", args_env="SGLANG_ARGS", config_file="d.yaml")
    assert write_place(both, "decode", FileValue("32", Place.CONFIG_FILE)) is Place.CONFIG_FILE
    assert write_place(both, "decode", FileValue(None, None)) is Place.ARGS_ENV
    assert write_place(both, "decode", FileValue("8", Place.SPEC)) is Place.ARGS_ENV
    assert write_place(_svc(config_file="d.yaml"), "decode", FileValue(None, None)) is (
        Place.CONFIG_FILE
    )


def test_a_set_with_nowhere_to_write_is_refused_naming_what_to_add() -> None:
    with pytest.raises(
        KnobError, match=r"decode: the spec names no place .* args_env .* config_file"
    ):
        write_place(_svc(), "decode", FileValue(None, None))
    with pytest.raises(KnobError, match="set by the spec itself"):
        write_place(_svc(), "decode", FileValue("8", Place.SPEC))
