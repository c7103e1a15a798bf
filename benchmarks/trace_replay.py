"""``bench --trace``: how closely a replay keeps its schedule, and what memory a long trace takes.

Two measurements, each printed as a table (run with ``--schedule``, ``--memory`` or both):

``--schedule``: the shipped agentic trace (``examples/traces/agentic.jsonl``) replayed ``--runs``
times through the real sglang-router and the simulated workers (cache report on), each by
``servelab bench --trace`` as a real process; per run the dispatch delay (a request's send −
its scheduled instant: a start's recorded offset, a later turn's answer + its delay) p50 / p99 /
max over every request, the hit rate, the load average while it ran, and the latest request of
the replay's first instant (the moment its clock starts).

``--bursty``: the same, of a burst-heavy trace instead (``servelab trace generate --kind agentic
--sessions 72 --rate 12 --turns 1 2 --resolution-ms 1000``: ~12 sessions start on each whole
second, as Mooncake's conversation trace records most of its arrivals), or of ``--trace FILE``;
the dispatch delay also by a request's position in its burst (the requests scheduled at one
instant, in the trace's order). ``--workers 1 2``: each run replayed by one bench process and by
two worker processes (``bench --workers 2``: the conversations dealt between them, one clock),
in turn, so the two are side by side at the same load. The dispatch delay is the client's own
lateness (no server can delay a send); "client late" says when its p99 is above 2 ms. ``--src
LABEL=DIR`` (repeatable): each run by each of these ``src`` folders' code in turn (``PYTHONPATH``),
interleaved on one stack so the machine's load falls on each alike: a change before and after
it side by side (``git archive main src | tar -x -C /tmp/before``, then ``--src before=/tmp/
before/src --src after=src``).

``--memory``: long-tail chat traces of ``--sizes`` requests (``servelab trace generate --kind
chat``, answers of a few tokens so the server is not the limit) replayed by ``servelab bench
--trace --speedup K`` against the truth server; per size the trace file, the prompt words a
replay that built every request up front would hold (the words of every prompt), and the peak
resident memory of the bench process (``ru_maxrss`` from ``wait4``), next to a 10-request
replay's (``--ledger``: each replay also recorded in a ledger, as ``bench`` does by default).

    .venv/bin/python benchmarks/trace_replay.py --schedule --runs 5 [--client-nice -10]
    .venv/bin/python benchmarks/trace_replay.py --bursty --runs 3 [--trace FILE] [--workers 1 2] \
        [--src before=/tmp/before/src --src after=src]
    .venv/bin/python benchmarks/trace_replay.py --memory --sizes 1000 10000 100000 --speedup 200 \
        [--ledger]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.support import free_port  # noqa: E402
from tests.support.stack import start_stack  # noqa: E402

TRACE = ROOT / "examples" / "traces" / "agentic.jsonl"
SERVELAB = [sys.executable, "-m", "servelab"]
WARMUP = 4  # requests each bench sends before its run (--warmup)


def _bench(
    args: list[str], nice: int = 0, ledger: Path | None = None, src: Path | None = None
) -> tuple[dict[str, Any], int, float]:
    """``servelab bench ARGS --json`` as a child (its niceness raised by ``nice``, lowered
    when negative; ``src``: that ``src`` folder's code, not this tree's), recording in ``ledger``
    (None: no ledger): its document, its peak RSS (KiB, from ``wait4``), wall seconds."""
    t0 = time.monotonic()
    env = None if src is None else dict(os.environ, PYTHONPATH=str(src))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        where = ["--no-ledger"] if ledger is None else ["--ledger", str(ledger)]
        proc = subprocess.Popen([*SERVELAB, "bench", *args, "--json", *where],
                                stdout=out, stderr=err, env=env,
                                preexec_fn=(lambda: os.nice(nice)) if nice else None)  # fmt: skip
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"bench failed ({proc.returncode}): {err.read().decode()[-2000:]}")
        return json.loads(out.read()), usage.ru_maxrss, time.monotonic() - t0


def _may_hold() -> bool:
    """Whether a bench here may hold a burst's writes (``CAP_SYS_NICE`` or an RTPRIO)."""
    code = "from servelab.io import instant\nwith instant.held() as ahead: print(ahead)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return out.stdout.strip() == "True"


def schedule(runs: int, time_scale: float, speedup: float, nice: int, trace: Path = TRACE,
             workers: tuple[int, ...] = (1,),
             trees: tuple[tuple[str, Path | None], ...] = (("this", None),)) -> None:  # fmt: skip
    stack = start_stack(time_scale=time_scale, env={"SERVELAB_SIM_WARMUP_S": "0"},
                        decode_args=["--enable-cache-report"])  # fmt: skip
    try:
        print(f"trace {trace.name}, speedup {speedup:g}, time scale {time_scale:g}, "
              f"client niceness {nice:+d}")  # fmt: skip
        print(f"warm-up: each bench sends {WARMUP} closed-loop requests on its kept-alive "
              "connections before its replay (--warmup); since a07d4a58 a replay also builds "
              "its first instant's requests and opens their connections before its clock "
              "starts (before it, on that instant's time)")  # fmt: skip
        print(f"a burst's writes ahead of ordinary processes (SCHED_FIFO while they are "
              f"written, io/instant.held): {'yes' if _may_hold() else 'no, not permitted here'} "
              "(trees before it write them at their niceness)")  # fmt: skip
        print("| run | tree | workers | requests | dispatch p50 ms | p99 ms | max ms | over 1 ms "
              "| loop lag p99 ms | hit rate | load avg | by position in a burst: p99 ms (n) "
              "| first instant: max ms (n) | client late |")  # fmt: skip
        print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
        plan = [(k, n, t) for k in range(runs) for n in workers for t in trees]
        # interleaved: load falls on each tree alike; a seed each: no replay finds the prompts
        # of the one before it in the server's cache (the same seed's would all be hits)
        for j, (k, n, (tree, src)) in enumerate(plan):
            args = ["--url", stack.router_url, "--trace", str(trace), "--speedup", str(speedup),
                    "--seed", str(j), "--warmup", str(WARMUP),
                    "--idle-timeout", "120", "--workers", str(n)]  # fmt: skip
            with tempfile.TemporaryDirectory() as out:
                doc, _rss, _wall = _bench([*args, "--export", out], nice, src=src)
                rows = [json.loads(line) for line in (Path(out) / "records.jsonl").open()]
            late = sum((r["sent_ns"] - r["scheduled_ns"]) > 1e6 for r in rows)
            (level,) = doc["levels"]
            d = level["dispatch_ms"]
            hit = level["cache"]["hit_rate"]
            lag = level["client"]["loop_lag_p99_ms"]
            who = f"yes (p99 {d['p99']:.1f} ms)" if d["p99"] > 2.0 else "no"
            print(f"| {k + 1} | {tree} | {n} | {level['requests']} | {d['median']:.3f} | "
                  f"{d['p99']:.3f} | {d['max']:.3f} | {late} | {lag:.1f} | {hit:.3f} | "
                  f"{os.getloadavg()[0]:.1f} | {_by_position(rows)} | {_first_instant(rows)} | "
                  f"{who} |")  # fmt: skip
    finally:
        stack.stop()


def _by_position(rows: list[dict[str, int]]) -> str:
    """Dispatch delay p99 by a request's position among those scheduled at its instant."""
    instants: dict[int, list[dict[str, int]]] = {}
    for row in sorted(rows, key=lambda r: r["index"]):
        instants.setdefault(row["scheduled_ns"], []).append(row)
    groups: dict[str, list[float]] = {"1st": [], "2-5": [], "6-10": [], "11+": []}
    for burst in instants.values():
        for pos, row in enumerate(burst, 1):
            key = "1st" if pos == 1 else "2-5" if pos <= 5 else "6-10" if pos <= 10 else "11+"
            groups[key].append((row["sent_ns"] - row["scheduled_ns"]) / 1e6)
    return ", ".join(f"{key} {_p99(ms):.2f} ({len(ms)})" for key, ms in groups.items() if ms)


def _first_instant(rows: list[dict[str, int]]) -> str:
    """The dispatch delay of the requests of the replay's first instant (its clock's start): the
    latest of them, and how many there are."""
    first = min(r["scheduled_ns"] for r in rows)
    ms = [(r["sent_ns"] - r["scheduled_ns"]) / 1e6 for r in rows if r["scheduled_ns"] == first]
    return f"{max(ms):.2f} ({len(ms)})"


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def _bursty_trace(where: Path) -> Path:
    path = where / "bursty.jsonl"
    subprocess.run([*SERVELAB, "trace", "generate", str(path), "--kind", "agentic",
                    "--sessions", "72", "--rate", "12", "--turns", "1", "2",
                    "--output-tokens", "32", "--resolution-ms", "1000"],
                   check=True, capture_output=True)  # fmt: skip
    return path


def _truth() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    script = ROOT / "benchmarks" / "peers" / "truth_server.py"
    proc = subprocess.Popen([sys.executable, str(script), "--port", str(port), "--gap-ms", "1",
                             "--prefill-ms", "1"], stdout=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=1).close()
            return proc, url
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the truth server did not start")


def memory(sizes: list[int], speedup: float, ledger: bool) -> None:
    server, url = _truth()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rows = []
            for n in [10, *sizes]:
                path = Path(tmp) / f"chat-{n}.jsonl"
                subprocess.run([*SERVELAB, "trace", "generate", str(path), "--kind", "chat",
                                "--requests", str(n), "--output-tokens", "4"],
                               check=True, capture_output=True)  # fmt: skip
                words = sum(json.loads(line)["input_length"] for line in path.open())
                args = ["--url", url, "--trace", str(path), "--speedup", str(speedup),
                        "--idle-timeout", "120"]  # fmt: skip
                doc, rss, wall = _bench(args, ledger=Path(tmp) / f"l{n}.db" if ledger else None)
                (level,) = doc["levels"]
                rows.append((n, path.stat().st_size, words, rss, wall, level["ok"]))
        where = "recorded in a ledger" if ledger else "no ledger"
        print(f"long-tail chat traces, 4-token answers, speedup {speedup:g}, truth server, {where}")
        print("| requests | trace MB | prompt words (all requests) | ok | peak RSS MB | wall s |")
        print("|---:|---:|---:|---:|---:|---:|")
        for n, size, words, rss, wall, ok in rows:
            print(f"| {n:,} | {size / 1e6:.1f} | {words:,} | {ok:,} | {rss / 1024:.0f} | "
                  f"{wall:.0f} |")  # fmt: skip
        base = rows[0][3]
        for n, _size, words, rss, _wall, _ok in rows[1:]:
            print(f"{n:,} requests: {(rss - base) * 1024 / n:,.0f} B of peak RSS per request over "
                  f"the 10-request replay; the prompts alone are {words / n:,.0f} words a "
                  "request, built as each is due")  # fmt: skip
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedule", action="store_true")
    parser.add_argument("--memory", action="store_true")
    parser.add_argument("--bursty", action="store_true")
    parser.add_argument("--trace", type=Path, default=None,
                        help="--bursty: replay this trace instead of generating one")  # fmt: skip
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", type=int, nargs="+", default=[1],
                        help="each run by each of these --workers")  # fmt: skip
    parser.add_argument("--time-scale", type=float, default=0.25)
    parser.add_argument("--speedup", type=float, default=None,
                        help="--schedule: 4 by default; --memory: 400")  # fmt: skip
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument(
        "--ledger",
        action="store_true",
        help="--memory: record each replay in a ledger (its writer's memory too)",
    )
    parser.add_argument("--src", action="append", default=[], metavar="LABEL=DIR",
                        help="--schedule/--bursty: a src folder to measure, interleaved with the "
                        "others run by run (repeatable; default: this tree's)")  # fmt: skip
    parser.add_argument("--client-nice", type=int, default=0,
                        help="--schedule/--bursty: the bench process's niceness change (-10: "
                        "ahead of the machine's other work)")  # fmt: skip
    args = parser.parse_args()
    trees: tuple[tuple[str, Path | None], ...] = tuple(
        (label, Path(folder).resolve()) for label, _, folder in (s.partition("=") for s in args.src)
    ) or (("this", None),)
    if args.schedule:
        schedule(args.runs, args.time_scale, args.speedup or 4.0, args.client_nice, TRACE,
                 tuple(args.workers), trees)  # fmt: skip
    if args.bursty:
        with tempfile.TemporaryDirectory() as tmp:
            trace = args.trace or _bursty_trace(Path(tmp))
            schedule(args.runs, args.time_scale, args.speedup or 1.0, args.client_nice, trace,
                     tuple(args.workers), trees)  # fmt: skip
    if args.memory:
        memory(args.sizes, args.speedup or 400.0, args.ledger)
    if not (args.schedule or args.bursty or args.memory):
        parser.print_help()


if __name__ == "__main__":
    main()
