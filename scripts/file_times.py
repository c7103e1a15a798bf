"""The test files' measured times, for the parallel pass's order (tests/file_times.json).

`make test`'s parallel pass gives a whole test file to one worker (`--dist loadfile`, the file's
stack is shared by its tests), so its wall time is at least the slowest file's, and a slow file
handed out last runs alone at the end. tests/conftest.py hands the files out slowest first (the
longest-processing-time-first rule), from the times this script writes:

    .venv/bin/pytest -n 3 --dist loadfile --no-loadscope-reorder -m "not solo" --junitxml=run.xml
    .venv/bin/python scripts/file_times.py run.xml            # writes tests/file_times.json
    .venv/bin/python scripts/file_times.py run.xml --workers 3 --show 20   # the expected makespan

``--workers N`` replays the handing out with N workers over the measured times and prints the
expected wall time of the parallel pass (collection and start-up not included).
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "file_times.json"


def file_times(junit: Path) -> dict[str, float]:
    """Seconds per test file (setup + call + teardown of its tests) from a junit XML report."""
    times: defaultdict[str, float] = defaultdict(float)
    for case in ET.parse(junit).iter("testcase"):
        module = case.get("classname", "")
        name = module.split("[")[0]
        parts = name.split(".")
        while parts and not parts[-1].startswith("test_"):
            parts.pop()  # a class inside the module
        times["/".join(parts) + ".py"] += float(case.get("time", "0"))
    return dict(times)


def makespan(times: dict[str, float], workers: int) -> tuple[float, list[float]]:
    """The wall time when files go, in the given order, to whichever worker is free first."""
    free = [(0.0, w) for w in range(workers)]
    loads = [0.0] * workers
    for seconds in times.values():
        at, w = heapq.heappop(free)
        loads[w] = at + seconds
        heapq.heappush(free, (loads[w], w))
    return max(loads), loads


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path)
    parser.add_argument("--workers", type=int, default=0, help="replay the order, print makespan")
    parser.add_argument("--show", type=int, default=0, help="print the N slowest files")
    parser.add_argument("--out", type=Path, default=OUT, help="where to write (%(default)s)")
    args = parser.parse_args(argv)
    times = file_times(args.junit)
    slowest = dict(sorted(times.items(), key=lambda kv: -kv[1]))
    for path, seconds in list(slowest.items())[: args.show]:
        print(f"{seconds:8.1f} s  {path}")
    if args.workers:
        total = sum(times.values())
        span, loads = makespan(slowest, args.workers)
        print(f"{len(times)} files, {total:.0f} s in all; slowest first on {args.workers} workers:"
              f" {span:.0f} s (workers {', '.join(f'{x:.0f}' for x in loads)})")  # fmt: skip
        return 0
    rounded = {path: round(seconds, 1) for path, seconds in slowest.items() if seconds >= 1.0}
    args.out.write_text(json.dumps(rounded, indent=1) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(rounded)} files of 1 s or more")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
