"""Where the client's TTFT goes, request by request, against the truth server.

One closed loop (C users, every one starting together, as ``benchmarks/peers.py`` runs ``bench``)
on the bench client's own path (:class:`servelab.io.http.stream.StreamClient` on uvloop, connections
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
``--against REV`` measures the client of git revision REV too (``git archive`` into a temporary
directory, the same script and truth server), alternating the two trees ``--rounds`` times, and
prints one row per run: dispatch and TTFT p99 against the server's, with the load average.

Usage: .venv/bin/python benchmarks/ttft_parts.py [--conc 64] [--requests 960] [--gap 20]
       [--against REV --rounds 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import uvloop

HERE = Path(__file__).resolve().parent
ROOT = Path(sys.argv[sys.argv.index("--root") + 1]) if "--root" in sys.argv else HERE.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(HERE))

from peers import SERVER_CPU, _get, free_port, start_truth, truth  # noqa: E402

from servelab.core.load import metrics  # noqa: E402
from servelab.core.load.records import RequestRecord  # noqa: E402
from servelab.core.load.workload import LengthDist  # noqa: E402
from servelab.io.http.stream import StreamClient  # noqa: E402
from servelab.ops.bench.jobs import jobs_for  # noqa: E402
from servelab.ops.bench.load import Load, slot_starts_ns  # noqa: E402

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


def measure(conc: int, n: int, gap_ms: float = 20.0) -> dict[str, dict[str, float]]:
    """One closed loop at ``conc`` on this tree's client: each part's percentiles (ms)."""
    port = free_port()
    server = start_truth(port, gap_ms, 50.0, SERVER_CPU)
    url = f"http://127.0.0.1:{port}"
    try:
        os.sched_setaffinity(0, {CLIENT_CPU})
        gc.disable()  # as `bench` runs a level (ops/benchload.run_part)
        records = [r for r in uvloop.run(_run(url, conc, n)) if r.ok]
        served = _get(url + f"/truth?last={n}")
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
    out = {
        name: {f"p{q}": _pct(values, q) for q in (50, 90, 99, 100)}
        for name, values in parts.items()
    }
    for name in ("ttft_ms", "gap_ms", "late_ms", "socket_wait_ms"):
        got = served[name]
        out[f"server {name}"] = {
            f"p{q}": got[f"p{q}" if q < 100 else "max"] for q in (50, 90, 99, 100)
        }
    out["run"] = {"n": len(records), "load": os.getloadavg()[0]}
    return out


def _print_parts(conc: int, got: dict[str, dict[str, float]]) -> None:
    print(f"C{conc}, {got['run']['n']:.0f} requests, load average {got['run']['load']:.1f}")
    print("| part (client) | p50 ms | p90 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|")
    for name, qs in got.items():
        if name != "run":
            print(f"| {name} | " + " | ".join(f"{v:.2f}" for v in qs.values()) + " |")


def _against(rev: str, rounds: int, conc: int, n: int, gap_ms: float) -> None:
    print(
        "| run | tree | dispatch p50 / p99 ms | TTFT p99 ms (server) | server late p99 ms | load |"
    )
    print("|---:|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / rev
        old.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(HERE.parent), "archive", rev, "src"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        for k in range(rounds):
            for name, root in ((f"before ({rev})", old), ("now", HERE.parent)):
                cmd = [sys.executable, __file__, "--root", str(root), "--json"]
                cmd += ["--conc", str(conc), "--requests", str(n), "--gap", str(gap_ms)]
                got = json.loads(subprocess.run(cmd, capture_output=True, check=True).stdout)
                d, t, srv = got["dispatch"], got["TTFT"], got["server ttft_ms"]
                print(
                    f"| {k + 1} | {name} | {d['p50']:.2f} / {d['p99']:.2f} | {t['p99']:.1f} "
                    f"({srv['p99']:.1f}) | {got['server late_ms']['p99']:.1f} | "
                    f"{got['run']['load']:.1f} |",
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conc", type=int, default=64)
    parser.add_argument("--requests", type=int, default=960)
    parser.add_argument("--gap", type=float, default=20.0, help="the truth server's token gap, ms")
    parser.add_argument("--against", default=None, help="a git revision to measure too")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.against:
        _against(args.against, args.rounds, args.conc, args.requests, args.gap)
        return
    got = measure(args.conc, args.requests, args.gap)
    if args.json:
        print(json.dumps(got))
    else:
        _print_parts(args.conc, got)


if __name__ == "__main__":
    main()
