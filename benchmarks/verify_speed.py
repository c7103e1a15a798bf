"""How long a warm layered verify of three local services takes (target: under a second).

Brings up the simulated stack (prefill + decode + the real sglang-router) with ``servelab``'s own
deploy on free loopback ports in a temp directory, warms it with one verify (the decode's cold
first request), then times ``--repeats`` warm verifications in-process (all four layers, and each
layer alone) and ``--cli`` runs of ``python -m servelab verify`` as a real process (the CLI's
wall time includes interpreter start-up and imports). Tears the stack down at the end.

    .venv/bin/python benchmarks/verify_speed.py --repeats 20 --cli 3
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.deploy.deploy import down, up
from servelab.ops.verify.verify import LAYERS, verify
from servelab.report.verify import check_detail

__all__ = ["main"]

TARGET_S = 1.0


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


def _write_spec(root: Path, time_scale: float) -> Path:
    prefill, bootstrap, decode, router, prom = _free_ports(5)
    (root / "env").mkdir()
    (root / "env" / "prefill.env").write_text(f"SERVELAB_SIM_TIME_SCALE={time_scale}\n")
    (root / "env" / "decode.env").write_text(
        f"SERVELAB_SIM_TIME_SCALE={time_scale}\n{DEFAULT_KNOB}=512\n"
    )
    spec = f"""
name = "verify-speed"
state_dir = "state"
[services.prefill]
role = "prefill"
url = "http://127.0.0.1:{prefill}"
start = "sim"
bootstrap_port = {bootstrap}
env_file = "env/prefill.env"
[services.decode]
role = "decode"
url = "http://127.0.0.1:{decode}"
start = "sim"
env_file = "env/decode.env"
knobs = ["{DEFAULT_KNOB}"]
depends_on = ["prefill"]
[services.router]
role = "router"
url = "http://127.0.0.1:{router}"
start = "router"
depends_on = ["prefill", "decode"]
router = {{ prometheus_port = {prom}, health_check_interval_s = 1 }}
"""
    path = root / "servelab.toml"
    path.write_text(spec)
    return path


def _summary(label: str, times: list[float]) -> str:
    times_ms = [t * 1000 for t in times]
    return (
        f"{label:<22} n={len(times):<3} min {min(times_ms):7.1f} ms  median "
        f"{statistics.median(times_ms):7.1f} ms  max {max(times_ms):7.1f} ms"
    )


async def _time_verify(
    loaded: LoadedSpec, ledger: Ledger, layers: tuple[str, ...], repeats: int
) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        report = await verify(loaded, layers=layers, ledger=ledger)
        times.append(time.perf_counter() - start)
        if not report.ok:
            failed = "; ".join(f"{c.layer}/{c.service}: {check_detail(c)}" for c in report.failures)
            raise SystemExit(f"verify failed: {failed}")
    return times


def _time_cli(root: Path, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "servelab", "verify", "--json"],
            cwd=root,
            capture_output=True,
            timeout=60,
            check=False,
        )
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"servelab verify exited {done.returncode}: {done.stderr[-500:]!r}")
    return times


async def _bench(root: Path, args: argparse.Namespace) -> list[str]:
    loaded = load_spec(_write_spec(root, args.time_scale))
    await up(loaded)
    lines = []
    try:
        with Ledger.open(root / "state" / "ledger.db") as ledger:
            cold = await _time_verify(loaded, ledger, LAYERS, 1)
            lines.append(_summary("first verify (cold)", cold))
            lines.append(_summary("warm verify, 4 layers", await _time_verify(
                loaded, ledger, LAYERS, args.repeats)))  # fmt: skip
            for layer in LAYERS:
                times = await _time_verify(loaded, ledger, (layer,), args.repeats)
                lines.append(_summary(f"  {layer} only", times))
        if args.cli:
            lines.append(_summary("CLI wall (process)", _time_cli(root, args.cli)))
    finally:
        await down(loaded)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--cli", type=int, default=3, help="runs of the real CLI (0: none)")
    parser.add_argument("--time-scale", type=float, default=0.25)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="servelab-verify-speed-") as tmp:
        lines = asyncio.run(_bench(Path(tmp), args))
    print("\n".join(lines))
    warm = next(line for line in lines if line.startswith("warm verify"))
    median_ms = float(warm.split("median")[1].split("ms")[0])
    verdict = "PASS" if median_ms < TARGET_S * 1000 else "FAIL"
    print(f"target: warm verify of 3 local services < {TARGET_S:.0f} s -> {verdict}")


if __name__ == "__main__":
    main()
