"""``bench --find-capacity`` on the simulator against the capacity its model predicts.

For each value of the decode knob (``SGLANG_SM120_MMA_TARGET_CTAS``), a simulated PD stack (the
real sglang-router) at ``--time-scale``; ``servelab bench --find-capacity --slo tpot_p90=LIMIT``
as a real process, within ``--concurrency LO,HI``; and the model's own answer: the largest
concurrency C in [LO, HI] whose modelled decode step (``servelab.sim.profile.decode_step_s``,
the batch's context as ``steady_throughput`` takes it: C × (input + output / 2)) is within the
limit. A request's TPOT is its decode steps' mean, so the two must agree up to the measurement's
noise. One table, both side by side:

    .venv/bin/python benchmarks/capacity.py --time-scale 0.5 --limit-ms 34.4 --knobs 256 512

``--limit-ms`` is in modelled ms (the SLO given to bench is the limit times the time scale).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.support.stack import start_stack  # noqa: E402

from servelab.sim.profile import DEFAULT_PROFILE, decode_step_s  # noqa: E402

KNOB = DEFAULT_PROFILE.knob_name


def model_capacity(limit_ms: float, lo: int, hi: int, knob: int, in_len: int, out_len: int) -> int:
    """The largest C in [lo, hi] whose modelled step is within ``limit_ms`` (lo - 1: none)."""
    best = lo - 1
    for c in range(lo, hi + 1):
        step = decode_step_s(DEFAULT_PROFILE, c, c * (in_len + out_len // 2), knob) * 1e3
        if step <= limit_ms:
            best = c
    return best


def measure(args: argparse.Namespace, knob: int) -> dict[str, Any]:
    stack = start_stack(time_scale=args.time_scale, env={"SERVELAB_SIM_WARMUP_S": "0"},
                        decode_env={KNOB: str(knob)})  # fmt: skip
    try:
        slo = f"tpot_p90={args.limit_ms * args.time_scale:.4g}ms"
        cmd = [sys.executable, "-m", "servelab", "bench", "--url", stack.router_url,
               "--find-capacity", "--slo", slo, "--concurrency", f"{args.lo},{args.hi}",
               "--requests", str(args.requests), "--warmup", str(args.warmup),
               "--input-len", str(args.input_len), "--output-len", str(args.output_len),
               "--json", "--no-ledger"]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=False)
        if done.returncode not in (0, 1):
            raise SystemExit(done.stderr[-2000:])
        return json.loads(done.stdout)  # type: ignore[no-any-return]
    finally:
        stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-scale", type=float, default=0.5)
    parser.add_argument("--limit-ms", type=float, default=34.4, help="modelled TPOT p90 limit")
    parser.add_argument("--knobs", type=int, nargs="+", default=[256, 512])
    parser.add_argument("--lo", type=int, default=8)
    parser.add_argument("--hi", type=int, default=96)
    parser.add_argument("--requests", type=int, default=192)
    parser.add_argument("--warmup", type=int, default=32)
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=64)
    args = parser.parse_args()
    rows = []
    for knob in args.knobs:
        doc = measure(args, knob)
        model = model_capacity(args.limit_ms, args.lo, args.hi, knob, args.input_len,
                               args.output_len)  # fmt: skip
        rows.append((knob, model, doc, os.getloadavg()[0]))
    print(
        f"TPOT p90 ≤ {args.limit_ms:g} ms modelled (× time scale {args.time_scale:g}), "
        f"concurrency {args.lo}..{args.hi}, {args.input_len} in / {args.output_len} out"
    )
    print("| knob | model's capacity | found | bracket | estimate | probes | sure | stop | load |")
    print("|---:|---:|---:|---|---:|---|---|---|---:|")
    for knob, model, doc, load in rows:
        probes = ", ".join(f"{p['load']:g}{'✓' if p['met'] else '✗'}" for p in doc["probes"])
        est = doc["estimate"]
        print(f"| {knob} | C{model} | C{doc['capacity']:g} | [{doc['capacity']:g}, "
              f"{doc['above']}] | {'–' if est is None else f'{est:.1f}'} | {probes} | "
              f"{doc['sure']} | {doc['stop']} | {load:.1f} |")  # fmt: skip
    if len(rows) == 2:
        (k0, m0, d0, _), (k1, m1, d1, _) = rows
        print(
            f"{k1} over {k0}: model {m1 / m0 - 1:+.1%}, found "
            f"{float(d1['capacity']) / float(d0['capacity']) - 1:+.1%}"
        )


if __name__ == "__main__":
    main()
