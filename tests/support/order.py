"""The parallel pass's order: test files slowest first, from their measured times.

`make test` gives a whole file to one worker (``--dist loadfile --no-loadscope-reorder``) in the
order the tests are collected; a slow file handed out last runs alone at the end. Handing out the
slowest first (the longest-processing-time-first rule) bounds the pass by about the total over the
workers. The times are ``tests/file_times.json`` (``scripts/file_times.py`` writes it from a junit
report); a file not in it counts as ``UNKNOWN_S``. Tests keep their order inside a file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeVar

__all__ = ["TIMES", "UNKNOWN_S", "load_times", "slowest_files_first"]

TIMES = Path(__file__).resolve().parents[1] / "file_times.json"
#: a file not measured yet: a few seconds, so new files go between the slow and the quick ones
UNKNOWN_S = 5.0

T = TypeVar("T")


def load_times(path: Path = TIMES) -> dict[str, float]:
    """The measured seconds per test file (relative to the repository), empty without the file."""
    if not path.is_file():
        return {}
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {str(k): float(v) for k, v in raw.items()}


def slowest_files_first(
    items: Sequence[T], file_of: Mapping[int, str], times: Mapping[str, float]
) -> list[T]:
    """``items`` by their file's time, slowest first; stable (the collected order otherwise)."""

    def key(index: int) -> float:
        return -times.get(file_of[index], UNKNOWN_S)

    return [items[i] for i in sorted(range(len(items)), key=key)]
