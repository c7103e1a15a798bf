"""A recorded bench config run again (``investigate --symptom slow``'s reproduction,
``ab --resume``, ``tune --resume``): its trace as recorded.

``servelab bench --trace FILE`` (and ``ab``) record the trace by its absolute path (resolved where
the command ran), so a replay of the recorded config reads the same file from any directory. A row
recorded before that holds the path as typed: relative to where bench ran. Read from elsewhere it
names another file or none; :func:`recorded_trace` says so plainly, before anything runs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from servelab.core.bench.contract import BenchConfig
from servelab.errors import HostError

__all__ = ["recorded_trace"]


def recorded_trace(config: BenchConfig, what: str, hint: str) -> BenchConfig:
    """``config`` with its trace's path absolute, or a :class:`HostError` naming the recorded
    path when it is relative and not found here (``what``: the recording command, ``hint``: what
    to do instead). A recorded absolute path is kept as is (a missing file: the reader says so)."""
    plan = config.trace
    if plan is None or Path(plan.path).is_absolute():
        return config
    here = Path(plan.path)
    if not here.is_file():
        raise HostError(
            f"the trace recorded as `{plan.path}` (relative to where {what} ran) is not found "
            f"here ({Path.cwd()}): {hint}"
        )
    return dataclasses.replace(config, trace=dataclasses.replace(plan, path=str(here.resolve())))
