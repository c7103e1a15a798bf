"""What a ``servelab`` process costs to start: CPU seconds of real ``python -m servelab`` runs.

The suite runs the CLI as real processes (``tests.support.run_cli``) over a thousand times, and
almost all of each run's CPU is imports. For each command below this runs ``--runs`` processes and
prints the median CPU seconds (user + system, from ``getrusage(RUSAGE_CHILDREN)``) and wall time
of one run. Given several trees (``--src LABEL=DIR``, each a ``src`` folder put first on
``PYTHONPATH``), it runs them interleaved, one process of each in turn, so the machine's load
falls on each alike, and prints them side by side with the ratio of each to the first.

The commands: eight ``--help`` (the group's own, ``bench``, ``verify``, ``knob get``, ``ledger
stats``, ``sim decode``, ``up``, ``case show``) and two real ones on a temporary copy of
``examples/local-sim.toml``: ``knob get decode SGLANG_SM120_MMA_TARGET_CTAS`` and ``ledger stats``
on an empty ledger.

    git archive main src | tar -x -C /tmp/before
    .venv/bin/python benchmarks/cli_startup.py --runs 7 --src before=/tmp/before/src --src after=src
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["COMMANDS", "main"]

_KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"

#: Each measured command: its label and its arguments ({spec} and {ledger} filled in).
COMMANDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("--help", ("--help",)),
    ("bench --help", ("bench", "--help")),
    ("verify --help", ("verify", "--help")),
    ("knob get --help", ("knob", "get", "--help")),
    ("ledger stats --help", ("ledger", "stats", "--help")),
    ("sim decode --help", ("sim", "decode", "--help")),
    ("up --help", ("up", "--help")),
    ("case show --help", ("case", "show", "--help")),
    ("knob get (real)", ("knob", "get", "-f", "{spec}", "decode", _KNOB)),
    ("ledger stats (real)", ("ledger", "stats", "-f", "{spec}", "--ledger", "{ledger}")),
)


@dataclass(frozen=True)
class Sample:
    """One process: CPU seconds (user + system) and wall seconds."""

    cpu: float
    wall: float


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(src: Path, args: list[str], cwd: Path) -> Sample:
    env = dict(os.environ, PYTHONPATH=str(src))
    cpu0, wall0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "servelab", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    sample = Sample(_children_cpu() - cpu0, time.perf_counter() - wall0)
    if done.returncode != 0:
        raise SystemExit(f"servelab {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return sample


def _workdir(src: Path) -> tuple[Path, dict[str, str]]:
    """A temporary copy of the local-sim example (spec and env files) and an empty ledger (made
    by ``src``'s own code)."""
    work = Path(tempfile.mkdtemp(prefix="cli-startup-"))
    shutil.copytree(ROOT / "examples" / "env", work / "env")
    shutil.copy(ROOT / "examples" / "local-sim.toml", work / "servelab.toml")
    ledger = work / "ledger.db"
    make = "import sys; from servelab.io.ledger.ledger import Ledger; Ledger.open(sys.argv[1])"
    env = dict(os.environ, PYTHONPATH=str(src))
    subprocess.run([sys.executable, "-c", make, str(ledger)], env=env, check=True)
    return work, {"spec": str(work / "servelab.toml"), "ledger": str(ledger)}


def _measure(
    trees: list[tuple[str, Path]], runs: int, work: Path, fill: dict[str, str]
) -> dict[tuple[str, str], list[Sample]]:
    samples: dict[tuple[str, str], list[Sample]] = {}
    for label, args in COMMANDS:
        filled = [a.format(**fill) for a in args]
        for _ in range(runs):
            for tree, src in trees:  # interleaved: load falls on each tree alike
                samples.setdefault((label, tree), []).append(_run(src, filled, work))
    return samples


def _table(trees: list[tuple[str, Path]], samples: dict[tuple[str, str], list[Sample]]) -> str:
    names = [t for t, _ in trees]
    head = f"{'command':<22}" + "".join(f"{n + ' cpu s':>15}{n + ' wall s':>15}" for n in names)
    if len(names) > 1:
        head += "".join(f"{n + '/' + names[0]:>18}" for n in names[1:])
    lines = [head, "-" * len(head)]
    totals = dict.fromkeys(names, 0.0)
    for label, _ in COMMANDS:
        cpu = {n: statistics.median(s.cpu for s in samples[(label, n)]) for n in names}
        wall = {n: statistics.median(s.wall for s in samples[(label, n)]) for n in names}
        row = f"{label:<22}" + "".join(f"{cpu[n]:>15.3f}{wall[n]:>15.3f}" for n in names)
        row += "".join(f"{cpu[n] / cpu[names[0]]:>18.2f}" for n in names[1:])
        lines.append(row)
        for n in names:
            totals[n] += cpu[n]
    total = f"{'sum of medians':<22}" + "".join(f"{totals[n]:>15.3f}{'':>15}" for n in names)
    total += "".join(f"{totals[n] / totals[names[0]]:>18.2f}" for n in names[1:])
    lines += ["-" * len(head), total]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5, help="processes per command and tree")
    parser.add_argument(
        "--src",
        action="append",
        default=[],
        metavar="LABEL=DIR",
        help="a src folder to measure (repeatable; default: this tree's src)",
    )
    ns = parser.parse_args(argv)
    trees = [(s.partition("=")[0], Path(s.partition("=")[2]).resolve()) for s in ns.src]
    trees = trees or [("this", ROOT / "src")]
    work, fill = _workdir(trees[0][1])
    try:
        samples = _measure(trees, max(1, ns.runs), work, fill)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"median of {ns.runs} runs per command and tree; load average {load:.2f}")
    print(_table(trees, samples))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
