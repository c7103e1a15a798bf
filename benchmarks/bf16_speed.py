"""The bf16 index keys' speed through the REAL router: ``SGLANG_NSA_INDEX_KEYS_BF16`` 0 vs 1.

Brings up sim prefill + decode + the real sglang-router (``tests.support.stack``), restarts the
workers for each arm (the knob is read at start-up only), drives ``sim_calibration``'s closed loop
of streaming chat completions (128 in / 64 out) at one concurrency, ABAB, and prints the measured
output tok/s of each arm (modelled seconds, as ``sim_calibration``) against the model's
``steady_throughput`` ratio (``docs/sim.md``, "The bf16 index keys")::

    .venv/bin/python benchmarks/bf16_speed.py --time-scale 0.5 --concurrency 64 --repeats 2
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import sim_calibration as calibration
from tests.support.stack import SimStack, start_stack

from servelab.sim.profile import DEFAULT_PROFILE, decode_step_s, steady_throughput

KNOB = DEFAULT_PROFILE.nsa_bf16_knob_name
IN_LEN, OUT_LEN = 128, 64


def _arm(stack: SimStack, on: bool, args: argparse.Namespace) -> float:
    env = {KNOB: "1" if on else "0"}
    stack.restart_workers(decode_env=env, prefill_env=env)
    asyncio.run(calibration._warm(stack.router_url))
    c = args.concurrency
    step = decode_step_s(DEFAULT_PROFILE, c, c * (IN_LEN + OUT_LEN // 2), 256, on)
    ramp = OUT_LEN * step * args.time_scale
    loop = calibration.closed_loop(
        stack.router_url, c, IN_LEN, OUT_LEN, args.warm_s + ramp, args.measure_s, ramp
    )
    win = asyncio.run(loop)
    tok_s = float(win.tokens / (args.measure_s / args.time_scale))
    print(f"  {KNOB}={int(on)} C{c}: {tok_s:.1f} tok/s, {win.requests} requests, "
          f"{win.errors} errors", file=sys.stderr)  # fmt: skip
    return tok_s


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--time-scale", type=float, default=0.5)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--warm-s", type=float, default=3.0)
    p.add_argument("--measure-s", type=float, default=8.0)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args(argv)
    stack = start_stack(time_scale=args.time_scale, env={"SERVELAB_SIM_WARMUP_S": "0"})
    runs: dict[bool, list[float]] = {False: [], True: []}
    try:
        for _ in range(args.repeats):
            for arm in (False, True):
                runs[arm].append(_arm(stack, arm, args))
    finally:
        stack.stop()
    off, on = (sum(runs[k]) / len(runs[k]) for k in (False, True))
    c = args.concurrency
    model = steady_throughput(DEFAULT_PROFILE, c, 256, IN_LEN, OUT_LEN, index_keys_bf16=True)
    model /= steady_throughput(DEFAULT_PROFILE, c, 256, IN_LEN, OUT_LEN)
    print(f"C{c}: off {off:.1f} tok/s, on {on:.1f} tok/s: {on / off - 1:+.2%} "
          f"(model {model - 1:+.2%}; {args.repeats} ABAB repeat(s), time scale "
          f"{args.time_scale})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
