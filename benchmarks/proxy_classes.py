"""Each failure class of a real proxy, localized N times: the closing table of issue 25.

For each class (tests/support/proxies.py ``CLASSES``: nginx and HAProxy from Debian, each run as a
plain process with its own config under a temp directory, misconfigured as deployments get
misconfigured), starts the proxy in front of the real sglang-router and the simulated workers
(one stack per time scale, shared by its classes), soaks through it ``--runs`` times, and prints
one row per class and run: the findings, the located reason, what the failure depends on, how
many layers other than the proxy were convicted, and the soak's wall time. Exit 1 when a row is
not what the class must give (the proxy alone, with its reason; the clean proxies: no finding).

    .venv/bin/python benchmarks/proxy_classes.py --runs 3
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.proxies import (  # noqa: E402
    CLASSES,
    SLOW_PREFILL_ARGS,
    STACK_SCALES,
    expected,
    soak_through,
    verdict,
)
from tests.support.soak import soak_targets  # noqa: E402
from tests.support.stack import sim_stack  # noqa: E402

from servelab.sim.settings import ENV_WARMUP_S  # noqa: E402

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="soaks per class (default 3)")
    parser.add_argument("--only", default="", help="comma-separated class names (default: all)")
    args = parser.parse_args(argv)
    names = {n for n in args.only.split(",") if n}
    wrong = 0
    print("| class | proxy | run | findings | reason | depends on | other layers | soak s |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="servelab-proxies-") as tmp:
        for stack, scale in STACK_SCALES.items():
            classes = [c for c in CLASSES if c.stack == stack and (not names or c.name in names)]
            if not classes:
                continue
            prefill = SLOW_PREFILL_ARGS if stack == "slow" else ()
            with sim_stack(time_scale=scale, env={ENV_WARMUP_S: "0"}, prefill_args=prefill) as st:
                for cls in classes:
                    for run in range(1, args.runs + 1):
                        workdir = Path(tmp) / f"{cls.name}-{run}"
                        result, took = soak_through(cls, soak_targets(st), workdir)
                        seen = verdict(result)
                        bad = expected(cls, seen)
                        wrong += bool(bad)
                        found = ", ".join(seen.findings) or "none"
                        mark = "" if not bad else " **WRONG: " + "; ".join(bad) + "**"
                        print(
                            f"| {cls.letter} {cls.name} | {cls.proxy.kind} | {run} | {found} | "
                            f"{seen.reason or '-'} | {seen.dependence or '-'} | {seen.others} | "
                            f"{took:.1f}{mark} |",
                            flush=True,
                        )
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
