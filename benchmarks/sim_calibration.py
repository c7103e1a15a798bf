"""Calibrate the simulator through the REAL router: knob 256 vs 512 at C64/C80/C96.

Brings up sim prefill + decode + the real sglang-router on free loopback ports at a time scale,
drives a closed loop of streaming chat completions (a minimal aiohttp client that counts token
events as they arrive), restarts the workers between arms (the knob is read at start-up only),
and prints measured output tok/s, the 512/256 ratios and the pure model's prediction.

    .venv/bin/python benchmarks/sim_calibration.py --time-scale 0.5 --measure-s 8
    .venv/bin/python benchmarks/sim_calibration.py --jitter --time-scale 0.25 --concurrency 256

``--jitter``: instead of the A/B, serve each concurrency through the router (knob at its default)
and report the decode step jitter inside the window: how late each decode step woke against its
absolute schedule (p50, p99, max; wall ms), from the decode worker's own histogram in
``/server_info`` (``servelab.scheduler.hist``) read at the window's start and end, with the decode
worker's CPU, this client's CPU and the whole machine's busy share over the window.
``--side-by-side --before REV``: the same measurement for REV's decode worker (its ``src/``
exported with ``git archive``, run through ``PYTHONPATH``) and this checkout's, in turn, and one
table of CPU per token (the decode process's CPU over the tokens it emitted in the window; "of
it system": its kernel time, mostly each token's loopback ``send``) and lateness p50/p99,
before against after, with the load average at the start and at the end:

    .venv/bin/python benchmarks/sim_calibration.py --side-by-side --before 0d7d9ad --after HEAD \
        --time-scale 0.25 --concurrency 64 256 1024 --decode-cpu 1 --decode-nice -10

(``--after`` defaults to this checkout's tree; ``--decode-cpu``/``--decode-nice`` pin the decode
worker to one core and lift its process's and autogroup's priority, both sides alike.)

``--loops asyncio uvloop``: each on a fresh stack whose workers run on that event loop
(``SERVELAB_SIM_LOOP``), in turn, ``--repeats`` times. The jitter's load is servelab's own load
generator (``--client servelab``, the default: ``bench``'s transport on uvloop, about a third of
the aiohttp client's CPU per token, which leaves the simulator more of the machine) or the
A/B's aiohttp client (``--client aiohttp``).

Throughput of a run = token events received inside the window [warm-up, warm-up + measure]
divided by the window, in MODELLED seconds (wall x 1 / time scale), so it is comparable with
``steady_throughput``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.stack import SimStack, start_stack

from servelab.core.load.records import REASON_DEADLINE, REASON_INTERRUPTED
from servelab.core.load.workload import LengthDist
from servelab.io.http.stream import StreamClient
from servelab.ops.bench.jobs import jobs_for
from servelab.ops.bench.load import Load, slot_starts_ns
from servelab.sim.profile import DEFAULT_PROFILE, decode_step_s, steady_throughput
from servelab.sim.scheduler import LAG_BUCKET_S
from servelab.sim.settings import ENV_EXTRAS

__all__ = ["main"]

KNOB = DEFAULT_PROFILE.knob_name
#: the simulator's own measurements (its pid, its step-lag histogram) are in its extras
EXTRAS = {ENV_EXTRAS: "1"}
TOKEN_MARK = b'"delta":{"content"'
MAX_REQUESTS_PER_USER = 10_000  # the loop is bounded in count as well as in time
BANDS = {64: (0.08, 0.18), 80: (-0.02, 0.05), 96: (0.02, 0.10)}


@dataclass
class Window:
    start: float
    end: float
    tokens: int = 0
    errors: int = 0
    requests: int = 0


async def _user(
    session: aiohttp.ClientSession,
    url: str,
    body_for: object,
    win: Window,
    stop_at: float,
    delay: float,
) -> None:
    await asyncio.sleep(delay)
    n = 0
    while time.monotonic() < stop_at and n < MAX_REQUESTS_PER_USER:
        body = body_for(n)  # type: ignore[operator]
        n += 1
        try:
            async with session.post(url, json=body) as resp:
                if resp.status != 200:
                    win.errors += 1
                    await resp.read()
                    continue
                async for chunk in resp.content.iter_any():
                    now = time.monotonic()
                    if win.start <= now <= win.end:
                        win.tokens += chunk.count(TOKEN_MARK)
            win.requests += 1
        except (aiohttp.ClientError, TimeoutError):
            win.errors += 1


async def closed_loop(
    base: str,
    concurrency: int,
    in_len: int,
    out_len: int,
    warm_s: float,
    measure_s: float,
    ramp_s: float,
) -> Window:
    """Run ``concurrency`` users until the window closes; count token events inside it.

    Users start spread evenly over ``ramp_s`` (about one request's duration): users started
    together finish together and stay in lock-step cohorts whose batch swings from 0 to C.
    """
    url = base + "/v1/chat/completions"
    rng = random.Random(concurrency)
    words = [f"w{rng.randrange(10_000)}" for _ in range(4096)]

    def body_for(n: int) -> dict[str, object]:
        start = rng.randrange(len(words) - in_len)
        prompt = " ".join(words[start : start + in_len])
        return {
            "model": "sim",
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": out_len,
            "stream": True,
        }

    t0 = time.monotonic()
    win = Window(t0 + warm_s, t0 + warm_s + measure_s)
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        users = [
            _user(session, url, body_for, win, win.end, i * ramp_s / concurrency)
            for i in range(concurrency)
        ]
        await asyncio.wait_for(asyncio.gather(*users), warm_s + measure_s + 120)
    return win


def _cpu_s(pid: int) -> tuple[float, float]:
    """A process's user and system CPU seconds so far (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _machine_busy() -> tuple[float, float]:
    """The machine's busy and total CPU seconds so far, every core (``/proc/stat``)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(fields) - idle) / tick, sum(fields) / tick


@dataclass
class Snap:
    """At one instant: the decode worker's lateness histogram and CPU (its system part too: the
    kernel's side of each token's ``send``), this client's CPU, the machine's busy and total CPU
    seconds, the time."""

    hist: dict[int, int]
    tokens: int
    decode_cpu_s: float
    decode_sys_s: float
    client_cpu_s: float
    busy_s: float
    total_s: float
    at: float


async def _sched(session: aiohttp.ClientSession, url: str, at: float) -> Snap:
    """At ``at``: what :class:`Snap` holds."""
    await asyncio.sleep(max(at - time.monotonic(), 0.0))
    async with session.get(url + "/server_info") as resp:
        info = (await resp.json())["servelab"]
    async with session.get(url + "/metrics") as resp:
        tokens = _counter(await resp.text(), "sglang:generation_tokens_total")
    hist = {int(k): int(v) for k, v in info["scheduler"]["hist"].items()}
    busy, total = _machine_busy()
    user, system = _cpu_s(int(info["pid"]))
    return Snap(
        hist, tokens, user + system, system, time.process_time(), busy, total, time.monotonic()
    )


def _counter(text: str, name: str) -> int:
    """A counter's value in a Prometheus text body (0 when absent)."""
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def _quantiles(hist: dict[int, int]) -> dict[str, float]:
    """p50, p99 and max (ms, upper bucket edge) of a lateness histogram; n steps."""
    total, out, seen = sum(hist.values()), {"n": float(sum(hist.values()))}, 0
    for bucket in sorted(hist):
        seen += hist[bucket]
        for name, q in (("p50", 0.5), ("p99", 0.99), ("max", 1.0)):
            if name not in out and seen >= q * total:
                out[name] = (bucket + 1) * LAG_BUCKET_S * 1e3
    return out


async def servelab_loop(
    base: str,
    concurrency: int,
    in_len: int,
    out_len: int,
    warm_s: float,
    measure_s: float,
    ramp_s: float,
) -> Window:
    """The same closed loop on servelab's own load generator (``bench``'s transport: the raw
    protocol, requests prepared before the start, a user's next request written from the read
    that ended its previous one); token events counted inside the window by their read stamps."""
    path = "/v1/chat/completions"
    duration = warm_s + measure_s
    per_user = min(MAX_REQUESTS_PER_USER, int(duration / max(ramp_s, 0.01)) + 3)
    jobs = jobs_for(
        concurrency * per_user,
        concurrency,
        input_len=LengthDist("fixed", in_len),
        output_len=LengthDist("fixed", out_len),
        shared_prefix_len=0,
        model="sim",
        endpoint=path,
        ignore_eos=True,
    )
    t0 = time.perf_counter_ns()
    start_ns, end_ns = t0 + round(warm_s * 1e9), t0 + round(duration * 1e9)
    async with StreamClient(base, concurrency=concurrency) as client:
        load = Load(client, path, lambda _r: None, end_ns)
        starts = slot_starts_ns(concurrency, round(ramp_s * 1e9))
        await asyncio.wait_for(load.closed(jobs, starts, t0=t0), duration + 120)
        load.decode()
    win = Window(start_ns / 1e9, end_ns / 1e9)  # perf_counter is time.monotonic's clock here
    for record in load.records:
        win.requests += record.ok
        win.errors += record.error not in (None, REASON_INTERRUPTED, REASON_DEADLINE)
        win.tokens += sum(
            n
            for at, n in zip(record.event_ns, record.event_tokens, strict=True)
            if start_ns <= at <= end_ns
        )
    return win


async def jitter_run(stack: SimStack, c: int, args: argparse.Namespace) -> dict[str, float]:
    """C users through the router; the decode steps' lateness inside the window."""
    ctx = c * (args.in_len + args.out_len // 2)
    ramp = args.out_len * decode_step_s(DEFAULT_PROFILE, c, ctx, 256) * args.time_scale
    start = time.monotonic()
    users = servelab_loop if args.client == "servelab" else closed_loop
    loop = users(
        stack.router_url, c, args.in_len, args.out_len, args.warm_s + ramp, args.measure_s, ramp
    )
    async with aiohttp.ClientSession() as session:
        before = asyncio.create_task(_sched(session, stack.decode_url, start + args.warm_s + ramp))
        after = asyncio.create_task(
            _sched(session, stack.decode_url, start + args.warm_s + ramp + args.measure_s)
        )
        win = await loop
        a, b = await before, await after
    window = {k: v - a.hist.get(k, 0) for k, v in b.hist.items() if v > a.hist.get(k, 0)}
    return {
        **_quantiles(window),
        "tok_s_wall": win.tokens / args.measure_s,
        "decode_cpu": (b.decode_cpu_s - a.decode_cpu_s) / (b.at - a.at),
        "cpu_us_per_token": (b.decode_cpu_s - a.decode_cpu_s) * 1e6 / max(b.tokens - a.tokens, 1),
        "sys_us_per_token": (b.decode_sys_s - a.decode_sys_s) * 1e6 / max(b.tokens - a.tokens, 1),
        "client_cpu": (b.client_cpu_s - a.client_cpu_s) / (b.at - a.at),
        "machine_busy": (b.busy_s - a.busy_s) / max(b.total_s - a.total_s, 1e-9),
        "model_tok_s": c / (decode_step_s(DEFAULT_PROFILE, c, ctx, 256) * args.time_scale),
        "errors": float(win.errors),
    }


def jitter_main(args: argparse.Namespace) -> int:
    """Serve each concurrency (on each workers' loop), print the decode step jitter; exit 0 when
    p99 < 2 ms."""
    print(
        f"time scale {args.time_scale}, in {args.in_len} / out {args.out_len}, window "
        f"{args.measure_s} s; decode step lateness, wall ms (bucket {LAG_BUCKET_S * 1e3} ms)"
    )
    print(
        f"{'loop':>7} {'C':>5} {'steps':>6} {'p50':>6} {'p99':>6} {'max':>7} {'tok/s wall':>10} "
        f"{'model tok/s':>10} {'decode CPU':>10} {'client CPU':>10} {'machine busy':>12} errors "
        "load"
    )
    ok = True
    for _ in range(args.repeats):
        for loop in args.loops:
            ok &= _jitter_stack(args, loop)
    return 0 if ok else 1


def _jitter_stack(args: argparse.Namespace, loop: str) -> bool:
    env = {"SERVELAB_SIM_WARMUP_S": "0", "SERVELAB_SIM_LOOP": loop, **EXTRAS}
    stack = start_stack(time_scale=args.time_scale, env=env)
    ok = True
    try:
        asyncio.run(_warm(stack.router_url))
        for c in args.concurrency:
            run = uvloop.run if args.client == "servelab" else asyncio.run
            res = run(jitter_run(stack, c, args))
            ok &= res.get("p99", 0.0) < 2.0
            print(
                f"{loop:>7} {c:>5} {res['n']:6.0f} {res.get('p50', 0):6.2f} "
                f"{res.get('p99', 0):6.2f} {res.get('max', 0):7.2f} {res['tok_s_wall']:10.0f} "
                f"{res['model_tok_s']:10.0f} {res['decode_cpu']:10.0%} {res['client_cpu']:10.0%} "
                f"{res['machine_busy']:12.0%} {res['errors']:.0f} "
                f"{os.getloadavg()[0]:.1f}",
                flush=True,
            )
    finally:
        stack.stop()
    return ok


def _export(rev: str) -> Path:
    """``rev``'s ``src/`` in a temporary directory (``git archive``): the "before" workers run
    from it (``PYTHONPATH``), everything else from this checkout."""
    root = Path(tempfile.mkdtemp(prefix="servelab-before-"))
    repo = Path(__file__).resolve().parents[1]
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", rev, "src"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    return root / "src"


def side_by_side_main(args: argparse.Namespace) -> int:
    """The decode worker of ``--before REV`` against this checkout's, in turn, each serving
    every concurrency through the router: CPU per token and schedule lateness side by side.
    Exit 0 when this checkout's p99 lateness is under 2 ms at every concurrency."""
    after = {} if args.after is None else {"PYTHONPATH": str(_export(args.after))}
    variants = {"before": {"PYTHONPATH": str(_export(args.before))}, "after": after}
    load_start = os.getloadavg()[0]
    results: dict[tuple[str, int], list[dict[str, float]]] = {}
    for _ in range(args.repeats):
        for name, extra in variants.items():
            stack = start_stack(
                time_scale=args.time_scale, env={"SERVELAB_SIM_WARMUP_S": "0", **EXTRAS, **extra}
            )
            _place(stack.procs["decode"].pid, args)
            try:
                asyncio.run(_warm(stack.router_url))
                for c in args.concurrency:
                    res = uvloop.run(jitter_run(stack, c, args))
                    results.setdefault((name, c), []).append(res)
                    print(f"  {name} C{c}: {res}", file=sys.stderr, flush=True)
            finally:
                stack.stop()
    print(
        f"decode worker, {args.before} (before) against {args.after or 'this checkout'} (after); "
        f"time scale "
        f"{args.time_scale}, in {args.in_len} / out {args.out_len}, window {args.measure_s} s, "
        f"{args.repeats} run(s) each; lateness in wall ms (bucket {LAG_BUCKET_S * 1e3} ms); "
        f"decode on CPU {args.decode_cpu if args.decode_cpu is not None else 'any'}, nice "
        f"{args.decode_nice}; load {load_start:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end"
    )
    print(
        f"{'C':>5} {'CPU us/token':>21} {'of it system':>17} {'lateness p50':>17} "
        f"{'lateness p99':>17} {'tok/s wall':>17} {'decode CPU':>15}"
    )
    print(
        f"{'':>5} {'before':>7} {'after':>6} {'ratio':>6} "
        + "{:>8} {:>8} ".format("before", "after") * 5
    )
    ok = True
    for c in args.concurrency:
        b = _mean(results[("before", c)])
        a = _mean(results[("after", c)])
        ok &= a.get("p99", 0.0) < 2.0
        ratio = b["cpu_us_per_token"] / max(a["cpu_us_per_token"], 1e-9)
        print(
            f"{c:>5} {b['cpu_us_per_token']:7.1f} {a['cpu_us_per_token']:6.1f} {ratio:5.1f}x "
            f"{b['sys_us_per_token']:8.1f} {a['sys_us_per_token']:8.1f} "
            f"{b.get('p50', 0):8.2f} {a.get('p50', 0):8.2f} {b.get('p99', 0):8.2f} "
            f"{a.get('p99', 0):8.2f} {b['tok_s_wall']:8.0f} {a['tok_s_wall']:8.0f} "
            f"{b['decode_cpu']:8.0%} {a['decode_cpu']:8.0%}"
        )
    return 0 if ok else 1


def _place(pid: int, args: argparse.Namespace) -> None:
    """``--decode-cpu``: the decode worker on that one core; ``--decode-nice``: its niceness (a
    negative one lets it through a machine other work keeps busy), and its autogroup's: with
    ``kernel.sched_autogroup_enabled`` the worker's session (started with its own) competes as
    a group with every other session, whatever the process's own niceness."""
    if args.decode_cpu is not None:
        os.sched_setaffinity(pid, {args.decode_cpu})
    if args.decode_nice:
        os.setpriority(os.PRIO_PROCESS, pid, args.decode_nice)
        autogroup = Path(f"/proc/{pid}/autogroup")
        if autogroup.exists():
            autogroup.write_text(str(args.decode_nice))


def _mean(runs: list[dict[str, float]]) -> dict[str, float]:
    keys = set.intersection(*(set(r) for r in runs))
    return {k: sum(r[k] for r in runs) / len(runs) for k in keys}


async def _warm(base: str) -> None:
    body = {"model": "sim", "messages": [{"role": "user", "content": "warm up"}], "max_tokens": 2}
    async with aiohttp.ClientSession() as s, s.post(base + "/v1/chat/completions", json=body) as r:
        await r.read()


def _measure(stack: SimStack, knob: int, args: argparse.Namespace) -> dict[int, float]:
    stack.restart_workers(decode_env={KNOB: str(knob)}, prefill_env={KNOB: str(knob)})
    asyncio.run(_warm(stack.router_url))
    out: dict[int, float] = {}
    for c in args.concurrency:
        ctx = c * (args.in_len + args.out_len // 2)
        ramp = args.out_len * decode_step_s(DEFAULT_PROFILE, c, ctx, knob) * args.time_scale
        loop = closed_loop(
            stack.router_url, c, args.in_len, args.out_len, args.warm_s + ramp, args.measure_s, ramp
        )
        win = asyncio.run(loop)
        modelled_s = args.measure_s / args.time_scale
        out[c] = win.tokens / modelled_s
        print(
            f"  knob={knob} C{c}: {out[c]:8.1f} tok/s (modelled), {win.requests} requests, "
            f"{win.errors} errors",
            file=sys.stderr,
        )
    return out


def _table(args: argparse.Namespace, runs: dict[int, list[dict[int, float]]]) -> tuple[str, bool]:
    lines = [
        f"time scale {args.time_scale}, in {args.in_len} / out {args.out_len} tokens, "
        f"window {args.measure_s} s wall after {args.warm_s} s warm-up, {args.repeats} repeat(s)",
        f"{'C':>4} {'256 tok/s':>10} {'512 tok/s':>10} {'ratio':>8} {'model':>8} {'band':>14} ok",
    ]
    ok_all = True
    mean = {
        k: {c: sum(r[c] for r in v) / len(v) for c in args.concurrency} for k, v in runs.items()
    }
    for c in args.concurrency:
        a, b = mean[256][c], mean[512][c]
        ratio = b / a - 1 if a else float("nan")
        model = steady_throughput(DEFAULT_PROFILE, c, 512, args.in_len, args.out_len)
        model /= steady_throughput(DEFAULT_PROFILE, c, 256, args.in_len, args.out_len)
        lo, hi = BANDS.get(c, (float("-inf"), float("inf")))
        ok = lo <= ratio <= hi
        ok_all &= ok
        band = f"[{lo:+.0%},{hi:+.0%}]"
        verdict = "yes" if ok else "NO"
        lines.append(
            f"{c:>4} {a:10.1f} {b:10.1f} {ratio:+8.2%} {model - 1:+8.2%} {band:>14} {verdict}"
        )
    if 80 in args.concurrency and 96 in args.concurrency:
        anomaly = mean[256][96] < mean[256][80]
        fixed = mean[512][96] >= mean[512][80]
        ok_all &= anomaly and fixed
        lines.append(f"256: thr(C96) < thr(C80): {anomaly};  512: thr(C96) >= thr(C80): {fixed}")
    return "\n".join(lines), ok_all


def main(argv: list[str] | None = None) -> int:
    """Run the calibration; exit 0 when every ratio lands in its band."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--time-scale", type=float, default=0.5)
    p.add_argument("--concurrency", type=int, nargs="+", default=[64, 80, 96])
    p.add_argument("--in-len", type=int, default=128)
    p.add_argument("--out-len", type=int, default=64)
    p.add_argument("--warm-s", type=float, default=3.0, help="wall seconds before the window")
    p.add_argument("--measure-s", type=float, default=8.0, help="wall seconds of the window")
    p.add_argument("--repeats", type=int, default=1, help="ABAB repeats of both arms")
    p.add_argument("--json", action="store_true", help="also print the raw numbers as JSON")
    p.add_argument("--jitter", action="store_true", help="report decode step jitter instead")
    p.add_argument(
        "--loops",
        nargs="+",
        default=["asyncio"],
        choices=["asyncio", "uvloop"],
        help="--jitter: the workers' event loops to measure, in turn (SERVELAB_SIM_LOOP)",
    )
    p.add_argument(
        "--client",
        default="servelab",
        choices=["servelab", "aiohttp"],
        help="--jitter: the load generator (servelab's own, on uvloop, as `bench` runs; or the "
        "minimal aiohttp client the A/B calibration uses)",
    )
    p.add_argument(
        "--side-by-side",
        action="store_true",
        help="CPU per token and decode lateness of --before's decode worker and this checkout's",
    )
    p.add_argument("--before", default="main", help="--side-by-side: the git revision before")
    p.add_argument(
        "--after", default=None, help="--side-by-side: a git revision after (default: this tree)"
    )
    p.add_argument("--decode-cpu", type=int, default=None, help="--side-by-side: pin the decode")
    p.add_argument("--decode-nice", type=int, default=0, help="--side-by-side: decode niceness")
    args = p.parse_args(argv)
    if args.side_by_side:
        return side_by_side_main(args)
    if args.jitter:
        return jitter_main(args)
    stack = start_stack(time_scale=args.time_scale, env={"SERVELAB_SIM_WARMUP_S": "0", **EXTRAS})
    runs: dict[int, list[dict[int, float]]] = {256: [], 512: []}
    try:
        for _ in range(args.repeats):
            for knob in (256, 512):
                runs[knob].append(_measure(stack, knob, args))
    finally:
        stack.stop()
    text, ok = _table(args, runs)
    print(text)
    if args.json:
        print(json.dumps({str(k): v for k, v in runs.items()}))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
