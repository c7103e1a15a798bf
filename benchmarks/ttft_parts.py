"""Where the client's TTFT goes, request by request, against the truth server.

One closed loop (C users, every one starting together, as ``benchmarks/peers.py`` runs ``bench``)
on the bench client's own path (:class:`servelab.io.http.StreamClient` on uvloop, connections
opened first, a warm-up of C requests, the records decoded after the run), client on CPU 1, truth
server on CPU 0. Each request's TTFT (from its scheduled send, as ``bench`` reports it) is split
on the client's own stamps, all ``perf_counter_ns`` (CLOCK_MONOTONIC, the server's clock too):

- dispatch: scheduled send -> the request's bytes handed to the socket (the client's own work,
  and its wait for the CPU);
- head: sent -> the response head read (the truth server writes it the moment it has parsed the
  request: loopback, the server reading its burst of requests, the client reading the answer);
- first token: head -> the first content token read (the server's 50 ms, its lateness, and the
  client's read delay).

Printed with the truth server's own TTFT, gap and lateness percentiles over the same requests.

Usage: .venv/bin/python benchmarks/ttft_parts.py [--conc 64] [--requests 960]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import uvloop

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from peers import SERVER_CPU, _get, free_port, start_truth, truth  # noqa: E402

from servelab.core import metrics  # noqa: E402
from servelab.core.records import RequestRecord  # noqa: E402
from servelab.core.workload import LengthDist  # noqa: E402
from servelab.io.http import StreamClient  # noqa: E402
from servelab.ops.benchload import Load, jobs_for, slot_starts_ns  # noqa: E402

CLIENT_CPU = 1
PATH = "/v1/chat/completions"


def _pct(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(len(ordered) * q / 100), len(ordered) - 1)] / 1e6 if ordered else 0.0


async def _run(url: str, conc: int, n: int) -> list[RequestRecord]:
    jobs = jobs_for(
        n + conc,
        0,
        input_len=LengthDist("fixed", 128),
        output_len=LengthDist("fixed", 64),
        shared_prefix_len=0,
        model="truth",
        endpoint=PATH,
        ignore_eos=True,
    )
    async with StreamClient(url, concurrency=conc) as client:
        await client.connect(conc)
        warm = Load(client, PATH, lambda _r: None, None)
        await warm.closed(jobs[:conc], slot_starts_ns(conc, 0), True)
        warm.decode()
        truth(url, reset=True)
        load = Load(client, PATH, lambda _r: None, None)
        await load.closed(jobs[conc:], slot_starts_ns(conc, 0))
        load.decode()
        return load.records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conc", type=int, default=64)
    parser.add_argument("--requests", type=int, default=960)
    args = parser.parse_args()
    port = free_port()
    server = start_truth(port, 20.0, 50.0, SERVER_CPU)
    url = f"http://127.0.0.1:{port}"
    try:
        os.sched_setaffinity(0, {CLIENT_CPU})
        records = [r for r in uvloop.run(_run(url, args.conc, args.requests)) if r.ok]
        served = _get(url + f"/truth?last={args.requests}")
    finally:
        server.terminate()
        server.wait(10)
    parts = {
        "TTFT": [metrics.ttft_ns(r) or 0 for r in records],
        "dispatch": [r.sent_ns - r.scheduled_ns for r in records],
        "head": [(r.first_byte_ns or 0) - r.sent_ns for r in records],
        "first token": [
            (metrics.ttft_ns(r) or 0) + r.scheduled_ns - (r.first_byte_ns or 0) for r in records
        ],
        "gap": [g for r in records for g in metrics.gaps_ns(r)],
    }
    print(f"C{args.conc}, {len(records)} requests, load average {os.getloadavg()[0]:.1f}")
    print("| part (client) | p50 ms | p90 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|")
    for name, values in parts.items():
        cells = " | ".join(f"{_pct(values, q):.2f}" for q in (50, 90, 99, 100))
        print(f"| {name} | {cells} |")
    for name in ("ttft_ms", "gap_ms", "late_ms"):
        got = served[name]
        print(
            f"| server {name} | {got['p50']:.2f} | {got['p90']:.2f} | {got['p99']:.2f} | "
            f"{got['max']:.2f} |"
        )


if __name__ == "__main__":
    main()
