"""A trace file, read one line at a time (:class:`~servelab.core.load.trace.TraceReader` makes
its conversations): a trace of any length is never held whole.

:func:`scan_trace` reads it once before a replay: every line is checked (a bad one stops the
command before any load) and the window's requests are counted (the progress bar's total).
:func:`trace_sessions` then streams it for the replay.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from servelab.core.load.trace import TraceReader, TraceSession, TraceWindow
from servelab.errors import HostError

__all__ = ["TraceScan", "scan_trace", "trace_sessions"]


def trace_sessions(path: Path) -> Iterator[TraceSession]:
    """The conversations (and lone requests) of the trace at ``path``, in file order.

    A line that is not a trace entry raises :class:`~servelab.errors.TraceError`; a file that
    cannot be read, :class:`~servelab.errors.HostError`.
    """
    reader = TraceReader()
    try:
        with path.open("rb") as lines:
            for line in lines:
                yield from reader.feed(line)
    except OSError as exc:
        raise HostError(f"cannot read the trace {path}: {exc.strerror or exc}") from exc
    yield from reader.flush()


@dataclass(frozen=True, slots=True)
class TraceScan:
    """What a window of a trace holds: its conversations (lone requests counted as one each),
    requests (every turn), the trace time its starts span (ms), ``span_ms`` (from the first
    start to the last instant its starts and delays name: the replay's schedule), and its
    longest request (prompt and output tokens) with that request's line."""

    sessions: int
    requests: int
    first_ms: float | None
    last_ms: float | None
    span_ms: float = 0.0
    longest: int = 0
    longest_line: int = 0


def scan_trace(path: Path, window: TraceWindow) -> TraceScan:
    """Read the whole trace once, checking every line; what ``window`` of it holds."""
    sessions = requests = longest = longest_line = 0
    first: float | None = None
    last: float | None = None
    end = 0.0
    for session in trace_sessions(path):
        if not window.holds(session):
            continue
        sessions += 1
        requests += len(session.turns)
        first = session.start_ms if first is None else min(first, session.start_ms)
        last = session.start_ms if last is None else max(last, session.start_ms)
        end = max(end, session.start_ms + sum(t.delay_ms for t in session.turns))
        for turn in session.turns:
            if turn.input_length + turn.output_length > longest:
                longest, longest_line = turn.input_length + turn.output_length, turn.line
    span = 0.0 if first is None else end - first
    return TraceScan(sessions, requests, first, last, span, longest, longest_line)
