"""An operation's progress as the console's lines, for tests that wait on or look for a line."""

from __future__ import annotations

from servelab.core.progress import ProgressEvent
from servelab.ops.context import Progress
from servelab.report.progress import describe_progress

__all__ = ["lines"]


def lines(into: list[str]) -> Progress:
    """A progress callback that keeps each event as the line the console prints for it."""

    def keep(event: ProgressEvent) -> None:
        into.append(describe_progress(event))

    return keep
