"""How many real ``servelab`` processes a test run starts through ``tests.support.run_cli``, and
their CPU: run pytest with ``SERVELAB_TEST_CLI_COUNT`` set to a file, then sum it here.

    rm -f /tmp/cli-calls.tsv
    SERVELAB_TEST_CLI_COUNT=/tmp/cli-calls.tsv .venv/bin/pytest -q tests/cli/test_knob_cli.py
    .venv/bin/python benchmarks/cli_calls.py /tmp/cli-calls.tsv

Each line of the file is one call: CPU seconds (user + system, as the test process's
``RUSAGE_CHILDREN`` grew meanwhile: a child of the test's own reaped in that time counts too), wall
seconds and the command's first two arguments; a call forked by the tests' fork server
(``tests/support/forkcli.py``) counts its child's ``wait4`` rusage and the fork, and the server's
start is a line of its own (``fork-server start``). ``SERVELAB_TEST_FORK=0`` execs every call.
Prints the count, the total and mean CPU and wall, and the commands that cost the most CPU in all.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("file", type=Path, help="the file SERVELAB_TEST_CLI_COUNT named")
    parser.add_argument("--top", type=int, default=15, help="commands listed (by total CPU)")
    ns = parser.parse_args(argv)
    cpu: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter[str] = collections.Counter()
    wall = 0.0
    for line in ns.file.read_text(encoding="utf-8").splitlines():
        seconds, elapsed, command = [*line.split("\t"), "", ""][:3]
        words = command.split(" ")
        name = " ".join(w for w in words[:2] if not w.startswith("-"))  # `knob get`, `bench`
        cpu[name] += float(seconds)
        calls[name] += 1
        wall += float(elapsed)
    n, total = sum(calls.values()), sum(cpu.values())
    print(f"{n} run_cli calls: {total:.1f} s CPU in all ({total / max(n, 1):.3f} s each), "
          f"{wall:.1f} s wall in all")  # fmt: skip
    print(f"{'command':<28}{'calls':>8}{'cpu s':>10}{'cpu s each':>12}")
    for name, seconds in sorted(cpu.items(), key=lambda kv: -kv[1])[: ns.top]:
        print(f"{name:<28}{calls[name]:>8}{seconds:>10.1f}{seconds / calls[name]:>12.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
