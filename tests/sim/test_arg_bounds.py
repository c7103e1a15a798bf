"""Every numeric option of ``servelab sim`` is range-checked at the command line (issue 38, the
eighth pass): a value outside its bounds, or a ``--config`` that cannot be read, is a usage error
(exit 2) naming the option (or the file) and the value, never a worker that hangs every request
or a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.errors import SimError
from servelab.sim.engineargs import ArgsExit, parse_worker_args
from servelab.sim.settings import load_settings
from tests.support import run_cli

REFUSED = [
    ("decode", ["--max-total-tokens", "0"], "--max-total-tokens: 0 "),
    ("decode", ["--max-running-requests", "-5"], "--max-running-requests: -5 "),
    ("decode", ["--context-length", "0"], "--context-length: 0 "),
    ("decode", ["--time-scale", "nan"], "--time-scale: nan "),
    ("decode", ["--time-scale", "0"], "--time-scale: 0.0 "),
    ("decode", ["--mem-fraction-static", "nan"], "--mem-fraction-static: nan "),
    ("decode", ["--mem-fraction-static", "1.5"], "--mem-fraction-static: 1.5 "),
    ("decode", ["--page-size", "0"], "--page-size: 0 "),
    ("decode", ["--chunked-prefill-size", "-2"], "--chunked-prefill-size: -2 "),
    ("decode", ["--warmup-s", "inf"], "--warmup-s: inf "),
    ("decode", ["--waiting-timeout", "-1"], "--waiting-timeout: -1.0 "),
    ("decode", ["--seed", "-1"], "--seed: -1 "),
    ("decode", ["--kv-leak", "nan"], "--kv-leak: nan "),
    ("decode", ["--slow-start-s", "nan"], "--slow-start-s: nan "),
    ("decode", ["--max-prefill-tokens", "0"], "--max-prefill-tokens: 0 "),
    ("prefill", ["--disaggregation-bootstrap-port", "70000"], "bootstrap-port: 70000 "),
    ("decode", ["--engine", "vllm", "--gpu-memory-utilization", "0"], "utilization: 0.0 "),
    ("decode", ["--engine", "vllm", "--max-num-seqs", "0"], "--max-num-seqs: 0 "),
    ("decode", ["--engine", "vllm", "--max-model-len", "-1"], "--max-model-len: -1 "),
    ("decode", ["--engine", "vllm", "--block-size", "0"], "--block-size: 0 "),
    ("prefill", ["--engine", "vllm", "--bootstrap-port", "0"], "--bootstrap-port: 0 "),
]


@pytest.mark.parametrize(("role", "argv", "named"), REFUSED)
def test_a_number_outside_its_bounds_is_a_usage_error(
    role: str, argv: list[str], named: str
) -> None:
    base = ["--port", "31000"] + (["--bootstrap-port", "31001"] if role == "prefill" else [])
    with pytest.raises(ArgsExit) as caught:
        parse_worker_args(role, [*base, *argv])  # type: ignore[arg-type]
    assert caught.value.status == 2
    assert f"argument {named}" in caught.value.text or named in caught.value.text


def test_the_port_is_checked_and_the_bounds_hold_values_inside() -> None:
    with pytest.raises(ArgsExit, match="argument --port: 99999 is not"):
        parse_worker_args("decode", ["--port", "99999"])
    with pytest.raises(ArgsExit, match="argument --port: 0 is not"):
        parse_worker_args("decode", ["--port", "0"])
    inside = [
        "--port", "65535", "--max-total-tokens", "1", "--max-running-requests", "1",
        "--context-length", "1", "--time-scale", "1000", "--mem-fraction-static", "1",
        "--chunked-prefill-size", "-1", "--seed", "0", "--warmup-s", "0", "--kv-leak", "1",
    ]  # fmt: skip
    parsed = parse_worker_args("decode", inside)
    assert parsed.server.port == 65535 and parsed.servelab["time_scale"] == 1000.0


def test_a_config_file_value_is_checked_too(tmp_path: Path) -> None:
    config = tmp_path / "decode.yaml"
    config.write_text("max-running-requests: 0\n")
    with pytest.raises(ArgsExit, match="argument --max-running-requests: 0 is not"):
        parse_worker_args("decode", ["--port", "1", "--config", str(config)])


def test_a_config_file_that_cannot_be_read_is_named_with_its_path(tmp_path: Path) -> None:
    missing = tmp_path / "gone.yaml"
    with pytest.raises(ArgsExit) as caught:
        parse_worker_args("decode", ["--port", "1", "--config", str(missing)])
    assert caught.value.status == 2 and str(missing) in caught.value.text
    assert "No such file or directory" in caught.value.text
    no_suffix = tmp_path / "nonexistent"
    with pytest.raises(ArgsExit) as caught:
        parse_worker_args("decode", ["--port", "1", "--config", str(no_suffix)])
    assert caught.value.status == 2 and str(no_suffix) in caught.value.text
    folder = tmp_path / "dir.yaml"
    folder.mkdir()
    with pytest.raises(ArgsExit, match=f"cannot read config file {folder}"):
        parse_worker_args("decode", ["--port", "1", "--config", str(folder)])


def test_the_environment_numbers_must_be_finite() -> None:
    for name in ("SERVELAB_SIM_TIME_SCALE", "SERVELAB_SIM_WARMUP_S"):
        with pytest.raises(SimError, match=f"{name} must be a finite number"):
            load_settings("decode", env={name: "nan"})
    with pytest.raises(SimError, match="slow_start_s must be a finite number"):
        load_settings("decode", env={"SERVELAB_SIM_SLOW_START_S": "nan"})


@pytest.mark.parametrize(
    "argv",
    [
        ["--max-running-requests", "-5"],
        ["--mem-fraction-static", "nan"],
        ["--port", "99999"],
        ["--config", "/nonexistent"],
    ],
)
def test_the_cli_says_one_error_with_exit_2_and_no_traceback(argv: list[str]) -> None:
    argv = ["--port", "31000", *argv] if argv[0] != "--port" else argv
    done = run_cli("sim", "decode", *argv, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "unexpected" not in done.stderr
    assert f"argument {argv[-2]}" in done.stderr or "argument --config" in done.stderr
    assert argv[-1] in done.stderr


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--port", "99999"], "'--port': 99999"),
        (["--port", "1", "--cut-after-bytes", "-1"], "'--cut-after-bytes': -1"),
        (["--port", "1", "--stall-reused-after", "-3"], "'--stall-reused-after': -3"),
        (["--port", "1", "--chunk-delay-ms", "1e300"], "'--chunk-delay-ms': 1e+300"),
    ],
)
def test_the_proxy_checks_its_numbers_too(argv: list[str], named: str) -> None:
    done = run_cli("sim", "proxy", "--upstream", "http://127.0.0.1:9", *argv, timeout=60)
    assert done.returncode == 2, done.stderr
    assert named in done.stderr and "Traceback" not in done.stderr
