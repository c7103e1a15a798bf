"""The three pinned routers, as ``routers.toml`` writes them down, against the real binaries.

- which health endpoint tells the truth when the only decode is dead (sglang-router 0.3.2 and
  smg 1.13: ``/health`` 200, ``/readiness`` 503, smg's with a reason; vllm-router 0.1.17:
  ``/health`` and ``/readiness`` 503, ``/liveness`` 200);
- what reaches the workers: the client's ``traceparent`` (all), its ``X-Request-ID`` (sglang-
  router and smg; vllm-router sends its own), SGLang's body ``rid`` (0.3.2 drops it, smg forwards
  it): the trace join rests on it;
- smg routes by model (a model no worker serves: 503 ``no_available_workers``), reports its
  policy in its selection counter and its loads in its own shape;
- sglang-router tracing itself: its own trace, its ``http_request`` span naming the client's id;
- the per-worker counters that prove a worker served (``core.verify.served``).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from servelab.core.engines import ENGINES
from servelab.core.load.identity import request_identity
from servelab.core.telemetry.promtext import parse_exposition
from servelab.core.telemetry.router import WORKER_SELECTION, parse_loads, routing_policy
from tests.contracts.stacks import MODEL, Pd, SpanSink, fetch, pd_stack, post, router_argv
from tests.support import free_ports
from tests.support.stack import start_process, stop_process, wait_http

ROUTERS = tomllib.loads((Path(__file__).parent / "routers.toml").read_text())
BODY = {"model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": "hi there"}]}


def _until(url: str, status: int, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while (got := fetch(url)[0]) != status and time.monotonic() < deadline:
        time.sleep(0.25)
    return got


@pytest.mark.parametrize("engine", ["sglang", "smg", "vllm"])
def test_a_dead_decode_as_each_router_reports_it(engine: str, tmp_path: Path) -> None:
    args = ["--enable-metrics"] if engine != "vllm" else []
    with pd_stack(engine, tmp_path, worker_args=args) as pd:
        assert fetch(pd.router_url + "/readiness")[0] == 200
        assert fetch(pd.router_url + "/health")[0] == 200
        stop_process(pd.procs[1])  # the only decode
        assert _until(pd.router_url + "/readiness", 503) == 503
        for path, status in ROUTERS[engine]["dead_decode"].items():
            assert _until(pd.router_url + path, status, 10) == status, path
        if "not_ready" in ROUTERS[engine]:  # smg says why
            assert (
                json.loads(fetch(pd.router_url + "/readiness")[2]) == ROUTERS[engine]["not_ready"]
            )


def test_smg_routes_by_model_and_reports_its_policy_and_loads(tmp_path: Path) -> None:
    facts = ROUTERS["smg"]
    with pd_stack("smg", tmp_path, worker_args=["--enable-metrics"]) as pd:
        listed = json.loads(fetch(pd.router_url + "/v1/models")[2])["data"]
        assert [m["id"] for m in listed] == [MODEL]
        status, body = post(pd.router_url + "/v1/chat/completions", {**BODY, "model": "default"})
        assert status == facts["routes_by_model"]["status"]
        assert json.loads(body)["error"]["code"] == facts["routes_by_model"]["code"]
        assert post(pd.router_url + "/v1/chat/completions", BODY)[0] == 200
        metrics = fetch(pd.router_metrics_url)[2]
        assert facts["policy_counter"]["name"] == WORKER_SELECTION
        assert routing_policy(metrics, "prefill") == routing_policy(metrics) == "round_robin"
        loads = parse_loads(fetch(pd.router_url + "/get_loads")[2])
        assert loads is not None and set(loads) == {pd.prefill_url, pd.decode_url}


@contextlib.contextmanager
def _echo_pd(
    engine: str, tmp_path: Path, router_extra: Sequence[str] = ()
) -> Iterator[tuple[Pd, Path]]:
    """Two echo workers (prefill, decode) behind the real router of ``engine``; their log."""
    pd = Pd(engine, free_ports(5), tmp_path)
    log = tmp_path / "echo.jsonl"
    try:
        for port in (0, 2):
            argv = [sys.executable, "-m", "tests.contracts.echo_worker", str(pd.ports[port]),
                    str(log), pd.workers]  # fmt: skip
            pd.procs.append(start_process(argv, tmp_path / f"echo-{port}.log"))
            wait_http(pd.url(port) + "/health", 30, pd.procs[-1])
        pd.procs.append(start_process([*router_argv(pd), *router_extra], tmp_path / "router.log"))
        wait_http(pd.router_url + "/readiness", 60, pd.procs[-1])
        yield pd, log
    finally:
        for proc in reversed(pd.procs):
            stop_process(proc)


def _legs(log: Path) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    return [x for x in lines if x["method"] == "POST"]


def _header(leg: dict[str, Any], name: str) -> str | None:
    return next((v for k, v in leg["headers"].items() if k.lower() == name), None)


@pytest.mark.parametrize("engine", ["sglang", "smg", "vllm"])
def test_what_reaches_the_workers(engine: str, tmp_path: Path) -> None:
    with _echo_pd(engine, tmp_path) as echoed:
        _reaches(*echoed)


def _reaches(pd: Pd, log: Path) -> None:
    rid, traceparent = request_identity("00000000000000e0", 3)
    headers = {"x-request-id": rid, "traceparent": traceparent}
    status, _ = post(pd.router_url + "/v1/chat/completions", {**BODY, "rid": "body-rid"}, headers)
    assert status == 200
    legs = _legs(log)
    assert len(legs) == 2  # prefill and decode
    facts = ROUTERS[pd.engine]
    assert all(_header(leg, "traceparent") == traceparent for leg in legs)  # "forwards"
    if pd.engine == "sglang":
        assert all(_header(leg, "x-request-id") == rid for leg in legs)
        assert all("rid" not in leg["body"] for leg in legs)  # "drops_body"
        assert len({leg["body"]["bootstrap_room"] for leg in legs}) == 1
    elif pd.engine == "smg":
        assert all(_header(leg, "x-request-id") == rid for leg in legs)
        assert facts["forwards_body"] == ["rid"]
        assert all(leg["body"].get("rid") == "body-rid" for leg in legs)  # "forwards_body"
        assert len({leg["body"]["bootstrap_room"] for leg in legs}) == 1
    else:
        ids = {_header(leg, "x-request-id") for leg in legs}
        assert len(ids) == 1 and str(ids.pop()).startswith("___prefill_addr_")  # "replaces"
    assert "traceparent" in facts["forwards"]
    # the router's per-worker counter counted both workers (core.verify.served reads it)
    counter = ENGINES[pd.workers].router_worker_counter
    assert counter == facts["per_worker_counter"]["name"]
    exp = parse_exposition(fetch(pd.router_metrics_url)[2])
    for url in (pd.prefill_url, pd.decode_url):
        got = [s for s in exp.samples if s.name == counter and s.label("worker") == url]
        assert sum(s.value for s in got if s.label("outcome") in (None, "success")) >= 1, url


def test_sglang_router_tracing_itself_starts_its_own_trace_and_names_the_request(
    tmp_path: Path,
) -> None:
    with SpanSink() as sink:
        trace = ["--enable-trace", "--otlp-traces-endpoint", sink.endpoint]
        with _echo_pd("sglang", tmp_path, trace) as (pd, log):
            _traced_itself(pd, log, sink)


def _traced_itself(pd: Pd, log: Path, sink: SpanSink) -> None:
    sent = [request_identity("00000000000000e1", i) for i in range(3)]
    for rid, traceparent in sent:
        headers = {"x-request-id": rid, "traceparent": traceparent}
        assert post(pd.router_url + "/v1/chat/completions", BODY, headers)[0] == 200
    legs = _legs(log)
    ours = {tp.split("-")[1] for _, tp in sent}
    theirs = {str(_header(leg, "traceparent")).split("-")[1] for leg in legs}
    assert not ours & theirs  # the workers get the router's own trace, not the client's
    rids = {rid for rid, _ in sent}
    spans = sink.wait(lambda got: any(s.request_id in rids for s in got), 30)
    named = [s for s in spans if s.request_id in rids]
    shape = ROUTERS["sglang"]["span"]
    assert named and all((s.name, s.service) == (shape["name"], shape["service"]) for s in named)
    assert all(s.trace_id in theirs for s in named)  # its span is the root of the workers' trace
