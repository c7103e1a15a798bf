"""An argument knob in the engine's own /server_info (shapes as the engines return them)."""

from __future__ import annotations

from servelab.core.knob import parse_knob
from servelab.core.knobs.serverinfo import EngineReport, reported_value

SGLANG_INFO = {
    "model_path": "/m",
    "max_running_requests": None,
    "chunked_prefill_size": 8192,
    "mem_fraction_static": 0.85,
    "disable_overlap_schedule": True,
    "disable_radix_cache": False,
    "schedule_policy": "fcfs",
    "json_model_override_args": '{"index_topk": 1024}',
    "status": "ready",
    "internal_states": [{"effective_max_running_requests_per_dp": 128}],
    "version": "0.5.13",
}
VLLM_INFO = {
    "vllm_config": {
        "scheduler_config": {"max_num_seqs": 256, "max_num_batched_tokens": 8192},
        "cache_config": {"enable_prefix_caching": True},
    }
}
SGLANG, VLLM = EngineReport(SGLANG_INFO), EngineReport(VLLM_INFO)


def test_sglang_fields_by_name_with_the_effective_limit_when_unset() -> None:
    got = reported_value(SGLANG, parse_knob("--max-running-requests"))
    assert (got.known, got.value) == (True, "128")
    assert got.where == "internal_states[0].effective_max_running_requests_per_dp"
    assert reported_value(SGLANG, parse_knob("--disable-overlap-schedule")).value == "on"
    assert reported_value(SGLANG, parse_knob("--disable-radix-cache")).value == "off"
    assert reported_value(SGLANG, parse_knob("--mem-fraction-static")).value == "0.85"
    assert reported_value(SGLANG, parse_knob("--chunked-prefill-size")).value == "8192"
    topk = reported_value(SGLANG, parse_knob("--json-model-override-args.index_topk"))
    assert (topk.value, topk.where) == ("1024", "json_model_override_args.index_topk")


def test_set_limit_is_read_from_the_field_itself() -> None:
    info = {**SGLANG_INFO, "max_running_requests": 64}
    assert reported_value(EngineReport(info), parse_knob("--max-running-requests")).value == "64"


def test_a_field_the_engine_does_not_report_is_unknown() -> None:
    got = reported_value(SGLANG, parse_knob("--cuda-graph-max-bs"))
    assert not got.known and got.value is None
    assert not reported_value(EngineReport({}), parse_knob("--policy")).known


def test_vllm_fields_are_found_once_anywhere_in_its_config() -> None:
    got = reported_value(VLLM, parse_knob("--max-num-seqs"))
    assert (got.known, got.value, got.where) == (
        True, "256", "vllm_config.scheduler_config.max_num_seqs",
    )  # fmt: skip
    assert reported_value(VLLM, parse_knob("--enable-prefix-caching")).value == "on"
    twice = {"vllm_config": {"a": {"max_num_seqs": 1}, "b": {"max_num_seqs": 2}}}
    assert not reported_value(EngineReport(twice), parse_knob("--max-num-seqs")).known


def test_a_token_in_the_reported_version_is_masked() -> None:
    """Issue 38's seventh pass: the version is quoted (a knob not read by that version) and
    stored; a token an engine puts in it is masked where the report is read."""
    report = EngineReport({"version": "0.5.4 ghp_VVVVplanted0123456789abcdef"})
    assert report.version == "0.5.4 ***"
    assert EngineReport({"version": "0.5.4"}).version == "0.5.4"
