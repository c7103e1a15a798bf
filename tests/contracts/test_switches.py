"""The engines' switches, as the simulator honours them (``sglang.toml``, ``vllm.toml``): what a
signal needs switched on, and what is answered when it is off; and the one switch of servelab's
own, ``SERVELAB_SIM_EXTRAS=1``, which only the simulator's own tests set."""

from __future__ import annotations

from pathlib import Path

from servelab.core.load.identity import request_identity
from servelab.core.telemetry.promtext import parse_exposition
from servelab.sim.settings import ENV_EXTRAS
from tests.contracts.stacks import MODEL, SpanSink, fetch, pd_stack, post

BODY = {"model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": "hi there"}]}


def _traced_to(sink: SpanSink, url: str, tag: str) -> str:
    """One request straight to ``url`` with its own trace; that trace's id."""
    _, parent = request_identity(tag, 0)
    status, body = post(url + "/v1/chat/completions", BODY, {"traceparent": parent})
    assert status == 200, body
    return parent.split("-")[1]


def test_sglang_serves_metrics_only_with_enable_metrics_and_traces_only_with_enable_trace(
    tmp_path: Path,
) -> None:
    with SpanSink() as sink:
        endpoint = ["--otlp-traces-endpoint", sink.endpoint]
        with (
            pd_stack("sglang", tmp_path / "off", worker_args=endpoint, router=False) as off,
            pd_stack("sglang", tmp_path / "on", worker_args=["--enable-metrics", "--enable-trace",
                                                              *endpoint], router=False) as on,
        ):  # fmt: skip
            assert fetch(off.decode_url + "/metrics")[0] == 404  # SGLang without --enable-metrics
            assert fetch(on.decode_url + "/metrics")[0] == 200
            quiet = _traced_to(sink, off.decode_url, "00000000000000d0")
            loud = _traced_to(sink, on.decode_url, "00000000000000d1")
            spans = sink.wait(lambda got: any(s.trace_id == loud for s in got), 30)
            # both exporters batch alike: once the traced worker's spans are in, the other's
            # would be too; an endpoint alone does not switch SGLang's tracing on
            assert any(s.trace_id == loud for s in spans)
            assert not any(s.trace_id == quiet for s in spans)


def test_vllm_logs_stats_and_serves_server_info_only_as_told(tmp_path: Path) -> None:
    with (
        pd_stack("vllm", tmp_path / "plain", router=False) as plain,
        pd_stack("vllm", tmp_path / "quiet", worker_args=["--disable-log-stats"],
                 env={"VLLM_SERVER_DEV_MODE": "1"}, router=False) as quiet,
    ):  # fmt: skip
        assert fetch(plain.decode_url + "/server_info")[0] == 404  # no VLLM_SERVER_DEV_MODE
        assert fetch(quiet.decode_url + "/server_info")[0] == 200
        status, _, text = fetch(quiet.decode_url + "/metrics")
        assert status == 200 and not parse_exposition(text).samples  # --disable-log-stats
        logged = parse_exposition(fetch(plain.decode_url + "/metrics")[2])
        assert any(s.name == "vllm:request_success_total" for s in logged.samples)
        assert fetch(plain.decode_url + "/get_load")[0] == 404  # not vLLM's


def test_only_the_extras_switch_adds_servelabs_own_object(tmp_path: Path) -> None:
    flags = ["--enable-metrics"]
    with (
        pd_stack("sglang", tmp_path / "real", worker_args=flags, router=False) as real,
        pd_stack("sglang", tmp_path / "extras", worker_args=flags, env={ENV_EXTRAS: "1"},
                 router=False) as extras,
    ):  # fmt: skip
        assert "servelab" not in fetch(real.decode_url + "/server_info")[2].replace(MODEL, "")
        assert '"servelab": {' in fetch(extras.decode_url + "/server_info")[2]
