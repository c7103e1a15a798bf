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
on an empty ledger. With ``--sim-port PORT``, also a simulated engine's whole start
(``sim decode --port PORT --admin --enable-metrics``, as ``tests/support/stack.py`` starts it,
up to its first ``/health`` 200, then SIGTERM): the CPU of the process from exec to its exit.

The processes run as the suite runs them (the Makefile unexports ``PYTHONDONTWRITEBYTECODE`` and
``tests/conftest.py`` drops it): bytecode cached, each command run once unmeasured first, so the
figures are the imports and not the compiler (with ``PYTHONDONTWRITEBYTECODE=1`` kept, a tree
without ``__pycache__``, as ``git archive`` makes it, would compile servelab in every run).

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
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["COMMANDS", "main"]

_KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"

#: The label of the simulated engine's start (measured with ``--sim-port``).
SIM_START = "sim decode (start)"
#: The longest a simulated engine may take to answer its first ``/health``.
_SIM_READY_S = 60.0

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


def _env(src: Path) -> dict[str, str]:
    """The environment of a measured process: ``src`` first on the path, and bytecode written
    and reused (as the suite has it)."""
    env = dict(os.environ, PYTHONPATH=str(src))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _run(src: Path, args: list[str], cwd: Path) -> Sample:
    cpu0, wall0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "servelab", *args],
        cwd=cwd,
        env=_env(src),
        capture_output=True,
        text=True,
        check=False,
    )
    sample = Sample(_children_cpu() - cpu0, time.perf_counter() - wall0)
    if done.returncode != 0:
        raise SystemExit(f"servelab {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return sample


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def _sim_start(src: Path, port: int, cwd: Path) -> Sample:
    """A simulated decode engine from exec to its first ``/health`` 200 (wall), and its CPU from
    exec to its exit after SIGTERM."""
    args = ["sim", "decode", "--port", str(port), "--admin", "--enable-metrics"]
    cpu0, wall0 = _children_cpu(), time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "servelab", *args],
        cwd=cwd,
        env=_env(src),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/health"
    try:
        while not _healthy(url):
            if proc.poll() is not None or time.perf_counter() - wall0 > _SIM_READY_S:
                raise SystemExit(f"servelab {' '.join(args)} did not start")
            time.sleep(0.02)
        wall = time.perf_counter() - wall0
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    if proc.returncode not in (0, -15):
        raise SystemExit(f"servelab {' '.join(args)} exited {proc.returncode}: {err}")
    return Sample(_children_cpu() - cpu0, wall)


def _workdir(src: Path) -> tuple[Path, dict[str, str]]:
    """A temporary copy of the local-sim example (spec and env files) and an empty ledger (made
    by ``src``'s own code)."""
    work = Path(tempfile.mkdtemp(prefix="cli-startup-"))
    shutil.copytree(ROOT / "examples" / "env", work / "env")
    shutil.copy(ROOT / "examples" / "local-sim.toml", work / "servelab.toml")
    ledger = work / "ledger.db"
    make = "import sys; from servelab.io.ledger.ledger import Ledger; Ledger.open(sys.argv[1])"
    subprocess.run([sys.executable, "-c", make, str(ledger)], env=_env(src), check=True)
    return work, {"spec": str(work / "servelab.toml"), "ledger": str(ledger)}


def _measure(
    trees: list[tuple[str, Path]],
    runs: int,
    work: Path,
    fill: dict[str, str],
    *,
    sim_port: int = 0,
    only: frozenset[str] = frozenset(),
) -> dict[tuple[str, str], list[Sample]]:
    samples: dict[tuple[str, str], list[Sample]] = {}
    for label, args in COMMANDS:
        if only and label not in only:
            continue
        filled = [a.format(**fill) for a in args]
        for _tree, src in trees:  # unmeasured: the bytecode written, as the suite finds it
            _run(src, filled, work)
        for _ in range(runs):
            for tree, src in trees:  # interleaved: load falls on each tree alike
                samples.setdefault((label, tree), []).append(_run(src, filled, work))
    if sim_port and (not only or SIM_START in only):
        for _ in range(runs):
            for tree, src in trees:
                sample = _sim_start(src, sim_port, work)
                samples.setdefault((SIM_START, tree), []).append(sample)
    return samples


def _table(trees: list[tuple[str, Path]], samples: dict[tuple[str, str], list[Sample]]) -> str:
    names = [t for t, _ in trees]
    head = f"{'command':<22}" + "".join(f"{n + ' cpu s':>15}{n + ' wall s':>15}" for n in names)
    if len(names) > 1:
        head += "".join(f"{n + '/' + names[0]:>18}" for n in names[1:])
    lines = [head, "-" * len(head)]
    totals = dict.fromkeys(names, 0.0)
    labels = [label for label, _ in (*COMMANDS, (SIM_START, ())) if (label, names[0]) in samples]
    for label in labels:
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
    parser.add_argument(
        "--sim-port",
        type=int,
        default=0,
        metavar="PORT",
        help="also measure a simulated engine's start, on this free loopback port",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="LABEL",
        help="measure only this command (its label in the table; repeatable)",
    )
    ns = parser.parse_args(argv)
    unknown = set(ns.only) - {label for label, _ in COMMANDS} - {SIM_START}
    if unknown:
        parser.error(f"no such command label: {', '.join(sorted(unknown))}")
    trees = [(s.partition("=")[0], Path(s.partition("=")[2]).resolve()) for s in ns.src]
    trees = trees or [("this", ROOT / "src")]
    work, fill = _workdir(trees[0][1])
    load_before = os.getloadavg()[0]
    try:
        samples = _measure(
            trees,
            max(1, ns.runs),
            work,
            fill,
            sim_port=ns.sim_port,
            only=frozenset(ns.only),
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after"
    print(f"median of {ns.runs} runs per command and tree (bytecode cached); {load}")
    print(_table(trees, samples))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
