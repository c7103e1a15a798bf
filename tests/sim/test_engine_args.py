"""The simulated workers take the real engines' arguments, parsed as the engines parse them, and
model their effect (``servelab.sim.engineargs``, ``servelab.sim.limits``)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from servelab.errors import SimError
from servelab.sim.engineargs import ArgsExit, Engine, SglangArgs, VllmArgs, parse_worker_args
from servelab.sim.limits import CachedTokens, resolve
from servelab.sim.profile import DEFAULT_PROFILE, decode_step_s, sched_gap_s
from servelab.sim.settings import WorkerSettings, settings_from_args
from tests.support import free_ports, run_cli
from tests.support.http import get_json, get_status
from tests.support.stack import start_process, stop_process, wait_http

P = DEFAULT_PROFILE


def sglang(*argv: str, role: str = "decode") -> SglangArgs:
    server = parse_worker_args(role, ["--port", "1", *argv]).server  # type: ignore[arg-type]
    assert isinstance(server, SglangArgs)
    return server


def vllm(*argv: str) -> VllmArgs:
    server = parse_worker_args("decode", ["--engine", "vllm", "--port", "1", *argv]).server
    assert isinstance(server, VllmArgs)
    return server


def test_values_come_as_argparse_takes_them() -> None:
    assert sglang("--max-running-requests=64").max_running_requests == 64
    assert sglang("--max-running-requests", "64").max_running_requests == 64
    assert (
        sglang("--max-running-requests", "8", "--max-running-requests", "16").max_running_requests
        == 16
    )
    assert sglang("--max-running", "32").max_running_requests == 32  # allow_abbrev
    assert sglang("--disable-overlap-schedule").disable_overlap_schedule is True
    assert sglang().disable_overlap_schedule is False
    assert sglang("--schedule-policy", "lof").schedule_policy == "lof"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bogus", "3"], "unrecognized arguments: --bogus 3"),
        (["--disable-overlap-schedule=true"], "ignored explicit argument 'true'"),
        (["--no-disable-overlap-schedule"], "unrecognized arguments"),  # store_true: no --no-
        (["--max_running_requests", "8"], "unrecognized arguments"),  # SGLang: dashes only
        (["--schedule-policy", "sjf"], "invalid choice: 'sjf'"),
        (["--disable"], "ambiguous option: --disable could match"),
        (["--disaggregation-mode", "prefill"], "does not match `servelab sim decode`"),
    ],
)
def test_a_bad_argument_is_refused_as_argparse_does(argv: list[str], message: str) -> None:
    with pytest.raises(ArgsExit) as err:
        parse_worker_args("decode", ["--port", "1", *argv])
    assert err.value.status == 2
    assert err.value.text.startswith("usage: servelab sim decode")
    assert "servelab sim decode: error: " in err.value.text and message in err.value.text


def test_help_is_text_with_status_0() -> None:
    with pytest.raises(ArgsExit) as err:
        parse_worker_args("decode", ["--help"])
    assert err.value.status == 0 and "--max-running-requests" in err.value.text
    assert "servelab options (not the engine's)" in err.value.text


def test_every_servelab_option_keeps_its_name() -> None:
    argv = ["--port", "1", "--host", "127.0.0.1", "--time-scale", "0.5", "--seed", "7"]
    argv += ["--warmup-s", "0", "--admin", "--transfer-fail-prob", "0.1", "--abort-wedge", "3/10"]
    argv += ["--corrupt-under-load", "5", "--slow-start-s", "1", "--transfer-fail-over-tokens", "9"]
    argv += ["--wedge", "--no-metrics", "--fail-fast-s", "2", "--waiting-timeout", "30"]
    argv += ["--served-model-name", "m", "--enable-trace", "--otlp-traces-endpoint", "h:1"]
    parsed = parse_worker_args("decode", argv)
    settings = settings_from_args(parsed, profile=P, env={})
    assert (settings.time_scale, settings.seed, settings.warmup_s) == (0.5, 7, 0.0)
    assert settings.admin and settings.waiting_timeout_s == 30.0
    assert settings.served_model_name == "m" and settings.otlp_endpoint == "h:1"
    f = settings.faults
    assert (f.transfer_fail_prob, f.corrupt_under_load, f.slow_start_s) == (0.1, 5, 1.0)
    assert f.wedge and f.no_metrics and f.fail_fast_s == 2.0 and f.transfer_fail_over_tokens == 9
    prefill = parse_worker_args("prefill", ["--port", "1", "--bootstrap-port", "2"])
    assert settings_from_args(prefill, profile=P, env={}).bootstrap_port == 2
    real = parse_worker_args("prefill", ["--port", "1", "--disaggregation-bootstrap-port", "3"])
    assert settings_from_args(real, profile=P, env={}).bootstrap_port == 3
    vllm_prefill = ["--engine", "vllm", "--port", "1", "--bootstrap-port", "4"]
    parsed = parse_worker_args("prefill", vllm_prefill)
    assert parsed.engine is Engine.VLLM
    assert settings_from_args(parsed, profile=P, env={}).bootstrap_port == 4


def test_the_sglang_config_file(tmp_path: Path) -> None:
    config = tmp_path / "decode.yaml"
    config.write_text(
        "max-running-requests: 32\ndisable-overlap-schedule: true\nenable-cache-report: false\n"
        "schedule-policy: lof\nmem-fraction-static: 0.8\n"
    )
    args = sglang("--config", str(config), "--max-running-requests", "64")
    assert args.max_running_requests == 64  # the command line wins over the file
    assert args.disable_overlap_schedule is True and args.enable_cache_report is False
    assert args.schedule_policy == "lof" and args.mem_fraction_static == 0.8
    (tmp_path / "u.yaml").write_text("max_running_requests: 8\n")  # a key is a flag as written
    with pytest.raises(ArgsExit, match="unrecognized arguments: --max_running_requests 8"):
        sglang("--config", str(tmp_path / "u.yaml"))
    (tmp_path / "c.json").write_text("{}")
    with pytest.raises(SimError, match="Config file must be YAML format"):
        sglang("--config", str(tmp_path / "c.json"))


def test_the_vllm_spelling_and_config_file(tmp_path: Path) -> None:
    assert vllm("--max_num_seqs=32").max_num_seqs == 32
    assert vllm("--max-num-seqs", "32").max_num_seqs == 32
    assert vllm("--no-enable-prefix-caching").enable_prefix_caching is False
    assert vllm("--enable-prefix-caching").enable_prefix_caching is True
    config = tmp_path / "v.yaml"
    config.write_text(
        "max_num_seqs: 16\nmax-num-batched-tokens: 2048\nenable_prefix_caching: false\n"
        "enable-prompt-tokens-details: true\n"
    )
    args = vllm("--config", str(config), "--max-num-seqs", "24")
    assert args.max_num_seqs == 24 and args.max_num_batched_tokens == 2048
    assert args.enable_prefix_caching is None  # a YAML false is dropped: the default holds
    assert args.enable_prompt_tokens_details is True
    with pytest.raises(ArgsExit, match="unrecognized arguments: --enable-trace"):
        vllm("--enable-trace")  # SGLang's flag, not vLLM's


def test_sglang_resolves_memory_and_the_running_batch() -> None:
    role_args = {"decode": sglang(), "prefill": sglang(role="prefill")}
    decode_args, decode = resolve(role_args["decode"], P, "decode")
    prefill_args, prefill = resolve(role_args["prefill"], P, "prefill")
    assert isinstance(decode_args, SglangArgs) and isinstance(prefill_args, SglangArgs)
    # 97,887 MiB: 10 GiB reserved on a decode, 13.5 GiB (an 8192-token chunk) on a prefill
    assert decode_args.mem_fraction_static == 0.895 and prefill_args.mem_fraction_static == 0.859
    assert decode_args.chunked_prefill_size == 8192 and decode_args.page_size == 1
    assert decode_args.max_running_requests is None  # reported as given, the limit resolved
    assert decode.max_running_requests == 2048 and decode.pool_tokens > prefill.pool_tokens
    assert decode.overlap_schedule and decode.prefix_cache
    assert decode.cached_tokens is CachedTokens.OFF
    small = resolve(sglang("--mem-fraction-static", "0.52", "--page-size", "16"), P, "decode")[1]
    assert small.pool_tokens % 16 == 0 and 10_000 < small.pool_tokens < 20_000
    tiny = resolve(sglang("--max-total-tokens", "2000"), P, "decode")[1]
    assert tiny.pool_tokens == 2000 and tiny.max_running_requests == 1000  # half the pool
    capped = resolve(
        sglang("--max-total-tokens", "50000", "--max-running-requests", "64"), P, "decode"
    )
    assert capped[1].pool_tokens == 50_000 and capped[1].max_running_requests == 64
    with pytest.raises(SimError, match="no GPU memory for the KV cache"):
        resolve(sglang("--mem-fraction-static", "0.4"), P, "decode")


def test_vllm_resolves_its_own_defaults() -> None:
    args, limits = resolve(vllm(), P, "decode")
    assert isinstance(args, VllmArgs)
    assert (args.max_num_seqs, args.max_num_batched_tokens, args.block_size) == (1024, 8192, 16)
    assert args.enable_prefix_caching is True and args.max_model_len == P.context_length
    assert limits.max_running_requests == 1024 and limits.page_size == 16
    assert resolve(vllm("--enable-prompt-tokens-details"), P, "decode")[1].cached_tokens is (
        CachedTokens.ALWAYS
    )


def test_overlap_off_adds_the_cpu_gap_to_every_step() -> None:
    on = WorkerSettings(role="decode")
    off = WorkerSettings(role="decode", engine_args=sglang("--disable-overlap-schedule"))
    base = decode_step_s(P, 64, 64 * 160, P.knob_default)
    assert on.decode_step_s(64, 64 * 160) == base
    assert off.decode_step_s(64, 64 * 160) == pytest.approx(base + sched_gap_s(P, 64))
    assert 1.08 <= off.decode_step_s(64, 64 * 160) / base <= 1.12  # SGLang v0.4's 1.1x


# ------------------------------------------------------------------------------------ live
def test_a_worker_reports_its_arguments_as_sglang_does(tmp_path: Path) -> None:
    """A decode started with ``--config`` and command-line arguments: ``/server_info`` is the
    flat dict SGLang gives, its ``cmdline`` holds the arguments; an unknown argument exits 2."""
    config = tmp_path / "decode.yaml"
    config.write_text("max-running-requests: 32\ndisable-overlap-schedule: true\n")
    port = free_ports(1)[0]
    argv = [sys.executable, "-m", "servelab", "sim", "decode", "--port", str(port)]
    argv += ["--config", str(config), "--max-running-requests=64", "--chunked-prefill-size", "4096"]
    proc = start_process(argv, tmp_path / "decode.log", {"SERVELAB_SIM_TIME_SCALE": "0.05"})
    try:
        wait_http(f"http://127.0.0.1:{port}/health", 30, proc)
        info = get_json(f"http://127.0.0.1:{port}/server_info")
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
    finally:
        stop_process(proc)
    assert b"--max-running-requests=64" in cmdline
    assert info["max_running_requests"] == 64 and info["disable_overlap_schedule"] is True
    assert info["chunked_prefill_size"] == 4096 and info["schedule_policy"] == "fcfs"
    assert info["disaggregation_mode"] == "decode" and info["status"] == "ready"
    assert info["internal_states"][0]["effective_max_running_requests_per_dp"] == 64
    assert info["max_total_num_tokens"] > 0 and isinstance(info["version"], str)
    fields = {f.name for f in dataclasses.fields(SglangArgs)}
    assert fields <= set(info) and "servelab" in info
    done = run_cli("sim", "decode", "--port", "1", "--bogus=1", timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert "error: unrecognized arguments: --bogus=1" in done.stderr


def test_vllm_serves_server_info_only_in_dev_mode(tmp_path: Path) -> None:
    port = free_ports(1)[0]
    argv = [sys.executable, "-m", "servelab", "sim", "decode", "--engine", "vllm"]
    argv += ["--port", str(port), "--max_num_seqs", "48"]
    env = {"SERVELAB_SIM_TIME_SCALE": "0.05"}
    for dev, expect in (("0", 404), ("1", 200)):
        proc = start_process(
            argv, tmp_path / f"vllm-{dev}.log", {**env, "VLLM_SERVER_DEV_MODE": dev}
        )
        try:
            wait_http(f"http://127.0.0.1:{port}/health", 30, proc)
            assert get_status(f"http://127.0.0.1:{port}/server_info") == expect
            assert get_json(f"http://127.0.0.1:{port}/version")["version"]
            if expect == 200:
                url = f"http://127.0.0.1:{port}/server_info?config_format=json"
                config = get_json(url)["vllm_config"]
                assert config["scheduler_config"]["max_num_seqs"] == 48
        finally:
            stop_process(proc)
