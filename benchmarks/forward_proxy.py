"""Soaks through a real forward proxy that fails the agents, localized N times (issue 37).

tinyproxy (Debian's package, tests/support/forward.py: a plain foreground process with its own
config under a temp directory) is the agents' forward proxy, named by ``HTTP_PROXY`` the way the
OpenAI SDK reads it (``servelab.core.load.proxyroute.route``). Its ``Timeout 1`` drops a request
whose answer sends no byte for a second; in front of the slow stack (time scale 10, no prefix
cache) a long uncached prefill is cut. Each run soaks one session of three 600-word rounds through
it and prints a row: the findings, what the failure depends on, how many layers other than the
proxy were convicted, and the soak's wall time. The ``pool`` class: ``MaxClients 1`` in front of
the fast stack, four sessions of 200-token answers, heads waiting in its queue past a 3 s idle
timeout. Exit 1 when a row names anything but the proxy, or not the class's dependence.

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
    Stack,
    engines_idle,
    verdict,
)
from tests.support.soak import soak_targets  # noqa: E402
from tests.support.stack import sim_stack  # noqa: E402

from servelab.core.load.proxyroute import route  # noqa: E402
from servelab.core.soak.result import SoakConfig, SoakResult  # noqa: E402
from servelab.ops.soak.soak import soak  # noqa: E402
from servelab.sim.settings import ENV_WARMUP_S  # noqa: E402

__all__ = ["main"]

#: Each class: the stack's time scale, tinyproxy's Timeout and MaxClients, the soak, and what the
#: failure must depend on (``timeout``: a long uncached prefill cut; ``pool``: one worker, four
#: agents' heads waiting in its queue behind 2-second answers).
_CLASSES: dict[str, tuple[Stack, int, int, SoakConfig, str]] = {
    "timeout": ("slow", 1, 100, SoakConfig(sessions=1, rounds=3, idle_timeout_s=8.0,
                duration_s=90.0, max_tokens=4, turn_words=600, check_determinism=False), "size"),
    "pool": ("fast", 600, 1, SoakConfig(sessions=4, rounds=3, idle_timeout_s=3.0,
             duration_s=90.0, max_tokens=200), "load"),
}  # fmt: skip


def _depends(result: SoakResult) -> str:
    found = {
        loc.matrix.located.dependence.value
        for loc in result.localizations
        if loc.matrix.located.dependence is not None
    }
    return ",".join(sorted(found)) or "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="soaks per class (default 3)")
    parser.add_argument("--only", default="", help="comma-separated classes (timeout, pool)")
    args = parser.parse_args(argv)
    names = [n for n in _CLASSES if not args.only or n in args.only.split(",")]
    wrong = 0
    print("| class | run | path | findings | depends on | other layers | soak s |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="servelab-forward-") as tmp:
        for name in names:
            stack, timeout_s, clients, config, depends = _CLASSES[name]
            prefill = SLOW_PREFILL_ARGS if stack == "slow" else ()
            env = {ENV_WARMUP_S: "0"}
            with sim_stack(time_scale=STACK_SCALES[stack], env=env, prefill_args=prefill) as st:
                targets = soak_targets(st)
                for run in range(1, args.runs + 1):
                    engines_idle(targets)
                    work = Path(tmp) / f"{name}-{run}"
                    with running_tinyproxy(work, timeout_s=timeout_s, max_clients=clients) as p:
                        path = route(targets.entry_url, {"HTTP_PROXY": p.url})
                        start = time.monotonic()
                        result = asyncio.run(soak(config, replace(targets, route=path)))
                        took = time.monotonic() - start
                    seen = verdict(result)
                    got = _depends(result)
                    bad = seen.findings != ("client_proxy",) or depends not in got.split(",")
                    wrong += bad
                    print(
                        f"| {name} | {run} | {path.variable} | "
                        f"{', '.join(seen.findings) or 'none'} | {got} | {seen.others} | "
                        f"{took:.1f}{' **WRONG**' if bad else ''} |",
                        flush=True,
                    )
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
