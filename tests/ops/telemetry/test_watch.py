"""The run's metrics through the real sglang-router: scraped directly, and asked of a real
Prometheus server scraping the same simulated workers and router; both equal what the workers
counted themselves."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest

from servelab.core.bench.contract import BenchConfig
from servelab.core.bench.summary import run_summary
from servelab.core.deploy.spec import PrometheusSpec
from servelab.core.ledger.codec import encode
from servelab.core.load.workload import LengthDist
from servelab.core.telemetry.promtext import parse_exposition
from servelab.core.telemetry.summary import MetricsSource, RunTelemetry, generated_tokens_per_s
from servelab.io.http.client import HttpClient
from servelab.io.specfile import load_spec
from servelab.ops.bench.bench import run_bench
from servelab.ops.context import Operation
from servelab.ops.telemetry.watch import MetricsPlan, MetricsWatch, metrics_sources
from tests.support.prometheus import prometheus_server
from tests.support.specs import PdPorts, write_pd_spec
from tests.support.stack import SimStack, sim_stack

REQUESTS = 6
COUNTER = "sglang:num_requests_total"


def _sources(stack: SimStack) -> list[MetricsSource]:
    def engine(name: str, port: int) -> MetricsSource:
        return MetricsSource(
            name, "engine", f"http://127.0.0.1:{port}/metrics", f"127.0.0.1:{port}"
        )

    router = f"127.0.0.1:{stack.prometheus_port}"
    return [
        engine("prefill", stack.prefill_port),
        engine("decode", stack.decode_port),
        MetricsSource("router", "router", f"http://{router}/metrics", router),
    ]


def _counted(url: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
        exp = parse_exposition(resp.read().decode())
    return sum(v for (name, _), v in exp.values().items() if name == COUNTER)


async def _load(stack: SimStack, n: int) -> None:
    body = {"model": "sim", "messages": [{"role": "user", "content": "hi there"}],
            "max_tokens": 4, "stream": False}  # fmt: skip
    async with HttpClient() as http:
        for _ in range(n):
            got = await http.probe(
                stack.router_url + "/v1/chat/completions", timeout=30, method="POST",
                json_body=body,
            )  # fmt: skip
            assert got.status == 200, got.describe()


async def _watched(stack: SimStack, watch: MetricsWatch) -> RunTelemetry:
    async with watch:
        await _load(stack, REQUESTS)
    assert watch.result is not None
    return watch.result


def _assert_counts(run: RunTelemetry, counted: dict[str, float]) -> None:
    for name in ("prefill", "decode"):
        source = run.source(name)
        assert source is not None and source.state == "ok", source
        assert source.counter(COUNTER) == counted[name]
    router = run.source("router")
    assert router is not None and router.state == "ok", router
    assert any(k.startswith("smg_") for k in [*router.counters, *router.gauges])


@pytest.fixture(scope="module")
def stack() -> SimStack:
    with sim_stack(time_scale=0.05) as running:
        yield running  # type: ignore[misc]


async def test_scraped_deltas_equal_what_the_workers_counted(stack: SimStack) -> None:
    before = {
        n: _counted(u) for n, u in (("prefill", stack.prefill_url), ("decode", stack.decode_url))
    }
    run = await _watched(stack, MetricsWatch(_sources(stack), interval_s=0.2))
    after = {
        n: _counted(u) for n, u in (("prefill", stack.prefill_url), ("decode", stack.decode_url))
    }
    counted = {n: after[n] - before[n] for n in before}
    assert counted["decode"] == REQUESTS
    assert run.via == "scrape"
    _assert_counts(run, counted)
    decode = run.source("decode")
    assert decode is not None and decode.scrapes >= 2
    assert any(k.startswith("sglang:num_running_reqs") for k in decode.gauges)
    assert any(k.startswith("sglang:time_to_first_token_seconds") for k in decode.quantiles)
    assert json.loads(json.dumps(encode(run)))["sources"][0]["service"] == "prefill"


async def test_a_real_prometheus_server_gives_the_same_deltas(
    stack: SimStack, tmp_path: Path
) -> None:
    sources = _sources(stack)
    jobs = {s.service: [s.instance] for s in sources}
    with prometheus_server(tmp_path / "prom", jobs, interval_s=0.5) as prom:
        spec = PrometheusSpec(url=prom.url, timeout_s=20)
        # a first scrape of every target before the run starts (its "before")
        await _wait_scraped(prom.url, [s.instance for s in sources])
        before = {
            n: _counted(u)
            for n, u in (("prefill", stack.prefill_url), ("decode", stack.decode_url))
        }
        run = await _watched(stack, MetricsWatch(sources, prometheus=spec, interval_s=0.5))
        after = {
            n: _counted(u)
            for n, u in (("prefill", stack.prefill_url), ("decode", stack.decode_url))
        }
    assert run.via == "prometheus"
    _assert_counts(run, {n: after[n] - before[n] for n in before})


async def _wait_scraped(url: str, instances: list[str]) -> None:
    async with HttpClient() as http:
        for _ in range(200):
            got = await http.get_json(f"{url}/api/v1/query?query=up")
            rows = (got or {}).get("data", {}).get("result", [])
            up = {r["metric"]["instance"] for r in rows if r["value"][1] == "1"}
            if set(instances) <= up:
                return
            await asyncio.sleep(0.1)
    raise AssertionError(f"Prometheus never scraped all of {instances}")


async def test_an_endpoint_that_does_not_answer_is_unknown(stack: SimStack) -> None:
    gone = MetricsSource("ghost", "engine", "http://127.0.0.1:9/metrics", "127.0.0.1:9")
    run = await _watched(stack, MetricsWatch([*_sources(stack)[:1], gone], interval_s=0.5))
    ghost = run.source("ghost")
    assert ghost is not None and ghost.state == "unknown" and ghost.reason
    assert run.unknown == ["ghost"]


async def test_the_sources_of_a_spec(tmp_path: Path) -> None:
    ports = PdPorts.free(proxy=False)
    loaded = load_spec(write_pd_spec(tmp_path, ports=ports))
    async with Operation(loaded) as op:
        got = {s.service: s for s in await metrics_sources(op)}
    assert got["decode"].url == f"http://127.0.0.1:{ports.decode}/metrics"
    assert got["decode"].instance == f"127.0.0.1:{ports.decode}"
    assert got["router"].kind == "router"
    assert got["router"].url == f"http://127.0.0.1:{ports.metrics}/metrics"


async def test_every_bench_run_keeps_what_the_servers_counted(stack: SimStack) -> None:
    requests = 12
    config = BenchConfig(url=stack.router_url, concurrencies=(2, 4), requests=requests,
                         input_len=LengthDist("fixed", 16), output_len=LengthDist("fixed", 8),
                         model="servelab-sim")  # fmt: skip
    before = _counted(stack.decode_url)
    result = await run_bench(config, metrics=MetricsPlan(tuple(_sources(stack))))
    assert result.n_failed == 0 and len(result.runs) == 2
    for run in result.runs:
        assert run.telemetry is not None
        decode = run.telemetry.source("decode")
        assert decode is not None and decode.counter(COUNTER) == requests
        rate = generated_tokens_per_s(run.telemetry, ["decode"])
        assert rate is not None and rate > 0
        summary = encode(run_summary(run))
        assert summary["telemetry"]["sources"][1]["service"] == "decode"
    assert _counted(stack.decode_url) - before == 2 * requests
    # without a plan nothing is watched: no telemetry, never a zero
    plain = await run_bench(replace(config, concurrencies=(2,)))
    assert plain.runs[0].telemetry is None and "telemetry" not in encode(run_summary(plain.runs[0]))


async def test_a_bench_run_keeps_the_telemetry_rules_reading_of_it(stack: SimStack) -> None:
    sources = [replace(s, role=s.service) if s.kind == "engine" else s for s in _sources(stack)]
    config = BenchConfig(url=stack.router_url, concurrencies=(4,), requests=24,
                         input_len=LengthDist("fixed", 16), output_len=LengthDist("fixed", 8),
                         model="servelab-sim")  # fmt: skip
    result = await run_bench(config, metrics=MetricsPlan(tuple(sources)))
    (run,) = result.runs
    assert run.telemetry is not None and run.telemetry.source("decode").role == "decode"  # type: ignore[union-attr]
    summary = encode(run_summary(run))
    got = {e["rule"] + "." + e["subject"]: e for e in summary["telemetry_evidence"]}
    client = got["client_vs_server.decodes"]
    # The client received what the decode counted (8 tokens x 24 requests), within 25%.
    assert client["state"] == "quiet", client
    cited = {(c["source"], c["series"]): c["value"] for c in client["cites"]}
    assert cited[("client", "output_tokens")] == 24 * 8
    assert cited[("decode", "sglang:generation_tokens_total")] == 24 * 8
    assert got["router_errors.router"]["state"] == "quiet"
    assert got["engine_transfer.decode"]["state"] == "quiet"
