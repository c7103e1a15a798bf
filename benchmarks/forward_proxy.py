"""A soak through a real forward proxy that drops long requests, localized N times (issue 37).

tinyproxy (Debian's package, tests/support/forward.py: a plain foreground process with its own
config under a temp directory) is the agents' forward proxy, named by ``HTTP_PROXY`` the way the
OpenAI SDK reads it (``servelab.core.load.proxyroute.route``). Its ``Timeout 1`` drops a request
whose answer sends no byte for a second; in front of the slow stack (time scale 10, no prefix
cache) a long uncached prefill is cut. Each run soaks one session of three 600-word rounds through
it and prints a row: the findings, the located reason, what the failure depends on, how many
layers other than the proxy were convicted, and the soak's wall time. Exit 1 when a row names
anything but the proxy.

    .venv/bin/python benchmarks/forward_proxy.py --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.forward import running_tinyproxy  # noqa: E402
from tests.support.proxies import (  # noqa: E402
    SLOW_PREFILL_ARGS,
    STACK_SCALES,
    engines_idle,
    verdict,
)
from tests.support.soak import soak_targets  # noqa: E402
from tests.support.stack import sim_stack  # noqa: E402

from servelab.core.load.proxyroute import route  # noqa: E402
from servelab.core.soak.result import SoakConfig  # noqa: E402
from servelab.ops.soak.soak import soak  # noqa: E402
from servelab.sim.settings import ENV_WARMUP_S  # noqa: E402

__all__ = ["main"]

_SOAK = SoakConfig(sessions=1, rounds=3, idle_timeout_s=8.0, duration_s=90.0, max_tokens=4,
                   turn_words=600, check_determinism=False)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="soaks (default 3)")
    args = parser.parse_args(argv)
    wrong = 0
    print("| run | path | findings | reason | depends on | other layers | soak s |")
    print("|---|---|---|---|---|---|---|")
    env = {ENV_WARMUP_S: "0"}
    with (
        tempfile.TemporaryDirectory(prefix="servelab-forward-") as tmp,
        sim_stack(time_scale=STACK_SCALES["slow"], env=env, prefill_args=SLOW_PREFILL_ARGS) as st,
    ):
        targets = soak_targets(st)
        for run in range(1, args.runs + 1):
            engines_idle(targets)
            with running_tinyproxy(Path(tmp) / f"run-{run}", timeout_s=1) as proxy:
                path = route(targets.entry_url, {"HTTP_PROXY": proxy.url})
                start = time.monotonic()
                result = asyncio.run(soak(_SOAK, replace(targets, route=path)))
                took = time.monotonic() - start
            seen = verdict(result)
            bad = seen.findings != ("client_proxy",)
            wrong += bad
            mark = " **WRONG**" if bad else ""
            print(
                f"| {run} | {path.variable} | {', '.join(seen.findings) or 'none'} | "
                f"{seen.reason or '-'} | {seen.dependence or '-'} | {seen.others} | "
                f"{took:.1f}{mark} |",
                flush=True,
            )
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
