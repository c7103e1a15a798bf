"""The peak memory of a servelab command of its own: ``VmHWM`` of its process, read as it ends.

``wait4``'s ``ru_maxrss`` is not it: Linux keeps, across ``exec``, the high-water mark of the
memory the child had before it (a copy of the forking pytest worker, 400 MB after a few stacks),
so a child that used 90 MB reads as 404. ``VmHWM`` in ``/proc/self/status`` is the mark of the
process's own memory since its ``exec``. Run as ``python -m tests.support.peakrss FILE ARGS...``:
servelab's CLI with ARGS, its exit code kept, the mark written to FILE (in MB) at exit.
"""

from __future__ import annotations

import atexit
import runpy
import subprocess
import sys
from pathlib import Path

__all__ = ["run_measured"]


def _write_mark(out: Path) -> None:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            out.write_text(str(int(line.split()[1]) / 1024))


def run_measured(
    args: list[str], mark: Path, timeout: float = 120
) -> tuple[subprocess.CompletedProcess[str], float]:
    """``servelab ARGS`` as a process: its result and its own peak RSS in MB."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.peakrss", str(mark), *args],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    return done, float(mark.read_text())


if __name__ == "__main__":
    atexit.register(_write_mark, Path(sys.argv[1]))
    sys.argv = ["servelab", *sys.argv[2:]]
    runpy.run_module("servelab", run_name="__main__", alter_sys=True)
