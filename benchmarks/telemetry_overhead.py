"""What tracing and scraping cost the load generator: client CPU per output token, side by side.

One closed-loop load (C users, N requests, 64 tokens every 20 ms from the truth server,
``benchmarks/peers/truth_server.py``, on CPU 0) is driven by servelab's own run loop
(:func:`servelab.ops.bench.part.run_part`, as ``bench`` runs it) in a child process pinned to CPU 1,
once per configuration:

- ``plain``: no identity headers;
- ``ids``: every request with its ``x-request-id`` and W3C ``traceparent`` (what ``bench`` sends);
- ``ids+receiver``: plus the OTLP receiver (:class:`servelab.io.otlp.OtlpReceiver`) in the client
  process, fed five spans per request over the run by a peer process on CPU 0 (the OpenTelemetry
  SDK's batch exporter, as the simulated workers export);
- ``ids+receiver+metrics``: plus :class:`servelab.ops.telemetry.watch.MetricsWatch` scraping three
  expositions of ~600 series (the peer serves them) every second, as ``bench -f`` does.

CPU is ``time.process_time`` of the whole child (every thread: gRPC's included) over the run and
the decode, divided by the output tokens. Every configuration runs ``--rounds`` times, the order
rotated each round; printed: the median CPU per token, each round's, and the median over rounds
of the ratio to ``plain`` in the same round. Then (``--micro`` alone) the per-request costs measured
with ``timeit`` on one core, free of the network and of the machine's load: the request head with
and without the two headers, the identity, and the receiver's parse of five spans.

Usage: .venv/bin/python benchmarks/telemetry_overhead.py [--conc 64] [--requests 640] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import timeit
from pathlib import Path
from time import perf_counter_ns
from typing import Any

from aiohttp import web
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from peers import SERVER_CPU, free_port, start_truth  # noqa: E402

from servelab.core.load.identity import request_identity  # noqa: E402
from servelab.core.load.records import RequestRecord  # noqa: E402
from servelab.core.load.workload import LengthDist  # noqa: E402
from servelab.core.telemetry.summary import MetricsSource  # noqa: E402
from servelab.io.http.stream import StreamClient  # noqa: E402
from servelab.io.otlp import OtlpReceiver, spans_of  # noqa: E402
from servelab.ops.bench.jobs import jobs_for  # noqa: E402
from servelab.ops.bench.load import slot_starts_ns  # noqa: E402
from servelab.ops.bench.part import Part, run_part  # noqa: E402
from servelab.ops.telemetry.watch import MetricsWatch  # noqa: E402

CONFIGS = ("plain", "ids", "ids+receiver", "ids+receiver+metrics")
CLIENT_CPU = 1
OSL = 64
SPANS_PER_REQUEST = 5
ENDPOINT = "/v1/chat/completions"


def _exposition() -> str:
    """~600 series: 40 histograms of 12 buckets, as an engine's /metrics."""
    lines = []
    for h in range(40):
        name = f"sglang:bench_overhead_{h}_seconds"
        lines.append(f"# TYPE {name} histogram")
        for le in [*(f"{2**k / 1000:g}" for k in range(11)), "+Inf"]:
            lines.append(f'{name}_bucket{{le="{le}"}} {h * 7}')
        lines += [f"{name}_sum {h * 0.5}", f"{name}_count {h * 7}"]
    return "\n".join(lines) + "\n"


async def _peer(otlp: str, metrics_port: int, n_spans: int, duration_s: float) -> None:
    """Serve /metrics and export ``n_spans`` spans evenly over ``duration_s``."""
    text = _exposition()
    app = web.Application()

    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(text=text)

    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", metrics_port).start()
    provider = TracerProvider()
    exporter = OTLPSpanExporter(endpoint=otlp, insecure=True)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
    tracer = provider.get_tracer("overhead")
    print("ready", flush=True)
    step = duration_s / max(n_spans, 1)
    for i in range(n_spans):
        now = time.time_ns()
        span = tracer.start_span(
            "prefill", start_time=now, attributes={"servelab.request_id": f"servelab-x-{i // 5}"}
        )
        span.end(end_time=now + 1000)
        await asyncio.sleep(step)
    provider.shutdown()
    await asyncio.sleep(3600)


async def _load(url: str, conc: int, n: int, tag: str) -> tuple[float, int]:
    jobs = jobs_for(
        n,
        1,
        input_len=LengthDist("fixed", 128),
        output_len=LengthDist("fixed", OSL),
        shared_prefix_len=0,
        model="truth",
        endpoint=ENDPOINT,
        ignore_eos=True,
    )
    async with StreamClient(url, concurrency=conc) as client:
        await client.connect(conc)
        part = Part(jobs, ENDPOINT, tuple(slot_starts_ns(conc, 0)), trace_tag=tag)
        got = await run_part(client, part, None)
    return got.cpu_s, sum(r.output_tokens for r in got.records if r.ok)


async def _child(
    config: str, url: str, conc: int, n: int, otlp_port: int, metrics: str
) -> dict[str, Any]:
    tag = "" if config == "plain" else "00112233445566aa"
    await _load(url, max(conc // 8, 1), conc, tag)  # warm-up
    async with contextlib.AsyncExitStack() as stack:
        if "receiver" in config:
            await stack.enter_async_context(OtlpReceiver(port=otlp_port))
        if "metrics" in config:
            sources = [MetricsSource(f"s{i}", "engine", metrics) for i in range(3)]
            await stack.enter_async_context(MetricsWatch(sources, interval_s=1.0))
        t0 = perf_counter_ns()
        cpu, tokens = await _load(url, conc, n, tag)
        wall = (perf_counter_ns() - t0) / 1e9
    return {"cpu_ms_per_token": cpu / max(tokens, 1) * 1e3, "tokens": tokens, "wall_s": wall}


def _spawn_peer(otlp_port: int, metrics_port: int, n_spans: int, duration_s: float):  # type: ignore[no-untyped-def]
    args = ["--peer", f"127.0.0.1:{otlp_port}", str(metrics_port), str(n_spans), str(duration_s)]
    peer = subprocess.Popen(
        [sys.executable, __file__, *args],
        stdout=subprocess.PIPE,
        text=True,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: os.sched_setaffinity(0, {SERVER_CPU}),
    )
    assert peer.stdout is not None and peer.stdout.readline().strip() == "ready"
    return peer


def _measure(config: str, url: str, sizes: list[str], n: int, expect_s: float) -> dict[str, Any]:
    otlp_port, metrics_port = free_port(), free_port()
    peer = _spawn_peer(otlp_port, metrics_port, n * SPANS_PER_REQUEST, expect_s)
    try:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                config,
                "--url",
                url,
                *sizes,
                "--otlp-port",
                str(otlp_port),
                "--metrics",
                f"http://127.0.0.1:{metrics_port}/metrics",
            ],
            capture_output=True,
            text=True,
            check=True,
            preexec_fn=lambda: os.sched_setaffinity(0, {CLIENT_CPU}),
        )
    finally:
        peer.terminate()
        peer.wait(10)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _export_request(n: int) -> bytes:
    """One OTLP export of ``n`` spans shaped as the simulated workers' (serialized)."""
    req = trace_service_pb2.ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.append(
        common_pb2.KeyValue(key="service.name", value=common_pb2.AnyValue(string_value="sim"))
    )
    scope = rs.scope_spans.add()
    for i in range(n):
        span = trace_pb2.Span(
            trace_id=os.urandom(16),
            span_id=os.urandom(8),
            name="prefill",
            start_time_unix_nano=i,
            end_time_unix_nano=i + 1,
        )
        for key, value in (("servelab.request_id", f"servelab-{i}"), ("servelab.role", "prefill")):
            span.attributes.append(
                common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))
            )
        scope.spans.append(span)
    encoded: bytes = req.SerializeToString()
    return encoded


def micro() -> None:
    """Per-request costs on one core, without the network: the identity and its two headers
    (``StreamClient.request_bytes`` with and without), and the receiver's work for five spans: the
    parse grpc does on arrival, and the conversion the receiver defers to after the run."""
    client = StreamClient("http://127.0.0.1:1", concurrency=1)
    tagged = RequestRecord(0, 0)
    body = b"x" * 600
    n = 200_000

    def identity() -> None:
        tagged.request_id, tagged.traceparent = request_identity("00112233445566aa", 12345)

    identity()
    path = "/v1/chat/completions"
    t_plain = timeit.timeit(lambda: client.request_bytes(path, body), number=n)
    t_tagged = timeit.timeit(
        lambda: client.request_bytes(path, body, tagged.request_id, tagged.traceparent), number=n
    )
    t_id = timeit.timeit(identity, number=n)
    raw = _export_request(500)
    parse = trace_service_pb2.ExportTraceServiceRequest.FromString
    t_parse = timeit.timeit(lambda: parse(raw), number=50) / 50 / 100  # per 5 spans
    message = parse(raw)
    t_convert = timeit.timeit(lambda: spans_of(message), number=20) / 20 / 100
    per = {
        "request head, no identity": t_plain / n,
        "request head + x-request-id + traceparent": t_tagged / n,
        "request_identity()": t_id / n,
        "receiver, during the run: parse 5 spans (protobuf, C)": t_parse,
        "receiver, after the run: 5 spans to Span objects": t_convert,
    }
    print("| per request | µs | µs per output token (64) |")
    print("|---|---:|---:|")
    for name, sec in per.items():
        print(f"| {name} | {sec * 1e6:.2f} | {sec * 1e6 / OSL:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conc", type=int, default=64)
    parser.add_argument("--requests", type=int, default=640)
    parser.add_argument("--rounds", type=int, default=3, help="each configuration this often")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--url", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--otlp-port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--metrics", default="", help=argparse.SUPPRESS)
    parser.add_argument("--peer", nargs=4, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--micro", action="store_true", help="only the per-request costs")
    args = parser.parse_args()
    if args.micro:
        micro()
        return
    if args.peer:
        otlp, mport, n_spans, dur = args.peer
        asyncio.run(_peer(otlp, int(mport), int(n_spans), float(dur)))
        return
    if args.child:
        res = asyncio.run(
            _child(args.child, args.url, args.conc, args.requests, args.otlp_port, args.metrics)
        )
        print(json.dumps(res))
        return
    port = free_port()
    server = start_truth(port, 20.0, 50.0, SERVER_CPU)
    url = f"http://127.0.0.1:{port}"
    sizes = ["--conc", str(args.conc), "--requests", str(args.requests)]
    expect_s = args.requests / args.conc * (0.05 + OSL * 0.02)
    cpu: dict[str, list[float]] = {c: [] for c in CONFIGS}
    loads = []
    try:
        for r in range(args.rounds):
            order = CONFIGS[r % len(CONFIGS) :] + CONFIGS[: r % len(CONFIGS)]  # rotated: no drift
            for config in order:
                res = _measure(config, url, sizes, args.requests, expect_s)
                cpu[config].append(res["cpu_ms_per_token"])
                loads.append(os.getloadavg()[0])
    finally:
        server.terminate()
        server.wait(10)
    print(
        f"C{args.conc}, {args.requests} requests x {OSL} tokens, truth server 20 ms/token, "
        f"{args.rounds} rounds (rotated order), load average {min(loads):.1f}-{max(loads):.1f}"
    )
    print(
        "| configuration | CPU ms/token (median) | per round | ratio to plain (median of rounds) |"
    )
    print("|---|---:|---|---:|")
    for config in CONFIGS:
        ratios = [x / p for x, p in zip(cpu[config], cpu["plain"], strict=True)]
        rounds = ", ".join(f"{x:.4f}" for x in cpu[config])
        print(
            f"| {config} | {statistics.median(cpu[config]):.4f} | {rounds} | "
            f"{statistics.median(ratios):.3f} |"
        )
    micro()


if __name__ == "__main__":
    main()
