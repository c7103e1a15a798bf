"""A trace file, read one line at a time (:class:`~servelab.core.load.trace.TraceReader` makes
its conversations): a trace of any length is never held whole.

:func:`scan_trace` reads it once before a replay: every line is checked (a bad one stops the
command before any load), the window's requests are counted (the progress bar's total) and its
bounds checked (a line over :data:`MAX_LINE_BYTES`, a burst over :data:`MAX_BURST` conversations or
:data:`MAX_BURST_TOKENS` prompt tokens, a window over :data:`MAX_WINDOW_REQUESTS`: refused, naming
the file and line).
:func:`trace_sessions` then streams it for the replay.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from servelab.core.load.trace import (
    MAX_BURST,
    MAX_BURST_TOKENS,
    MAX_LINE_BYTES,
    MAX_WINDOW_REQUESTS,
    TraceReader,
    TraceSession,
    TraceWindow,
)
from servelab.errors import HostError, TraceError

__all__ = ["TraceScan", "scan_trace", "trace_sessions"]


def trace_sessions(path: Path) -> Iterator[TraceSession]:
    """The conversations (and lone requests) of the trace at ``path``, in file order.

    A line that is not a trace entry raises :class:`~servelab.errors.TraceError`; a file that
    cannot be read, :class:`~servelab.errors.HostError`.
    """
    reader = TraceReader()
    try:
        with path.open("rb") as lines:
            while line := lines.readline(MAX_LINE_BYTES + 1):
                if len(line) > MAX_LINE_BYTES:
                    raise TraceError(f"{path} line {reader.lines + 1}: longer than "
                                     f"{MAX_LINE_BYTES:,} bytes")  # fmt: skip
                yield from _named(path, reader.feed, line)
    except OSError as exc:
        raise HostError(f"cannot read the trace {path}: {exc.strerror or exc}") from exc
    yield from _named(path, lambda _: reader.flush(), b"")


def _named(
    path: Path, read: Callable[[bytes], list[TraceSession]], line: bytes
) -> list[TraceSession]:
    """``read(line)``, a line that is not a trace entry named with the file it is in."""
    try:
        return read(line)
    except TraceError as exc:
        raise TraceError(f"{path} {exc}") from None


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


class _Bounds:
    """The bounds of a replay checked as the scan goes (``core/load/trace.py``): conversations
    starting at one instant of the replay (:data:`MAX_BURST`), the prompt tokens their first
    turns ask (:data:`MAX_BURST_TOKENS`: those prompts are built ahead of the instant) and
    requests in the window (:data:`MAX_WINDOW_REQUESTS`); a line past one stops the scan, naming
    the file and line."""

    def __init__(self, path: Path, speedup: float) -> None:
        self.path = path
        self.speedup = speedup
        self.origin: float | None = None
        self.instant: float | None = None
        self.burst = self.burst_tokens = self.requests = 0

    def _offset_ns(self, start_ms: float) -> float:
        """A start's offset in the replay, as :func:`~servelab.core.load.trace.session_offsets_ns`
        computes it (ns from the first start, rounded), or its float when that is not finite
        (``--speedup 1e-300``: the replay's own cap refuses that schedule after the scan)."""
        if self.origin is None:
            self.origin = start_ms
        ns = (start_ms - self.origin) * 1e6 / self.speedup
        return round(ns) if math.isfinite(ns) else ns

    def add(self, session: TraceSession) -> None:
        """``session``, at its instant of the replay (which never goes back: an earlier start
        goes at the instant before it)."""
        offset = self._offset_ns(session.start_ms)
        if self.instant is None or offset > self.instant:
            self.instant, self.burst, self.burst_tokens = offset, 0, 0
        self.burst += 1
        self.burst_tokens += session.turns[0].input_length
        self.requests += len(session.turns)
        if self.burst > MAX_BURST:
            raise TraceError(f"{self.path} line {session.line}: more than {MAX_BURST:,} "
                             "conversations start at one instant of the replay (each is held "
                             "with a connection ahead of it): spread them or choose a "
                             "--trace-window")  # fmt: skip
        if self.burst_tokens > MAX_BURST_TOKENS:
            raise TraceError(f"{self.path} line {session.line}: the conversations starting at "
                             f"one instant of the replay ask more than {MAX_BURST_TOKENS:,} "
                             "prompt tokens (each prompt is built and held ahead of its "
                             "instant): spread them or choose a --trace-window")  # fmt: skip
        if self.requests > MAX_WINDOW_REQUESTS:
            raise TraceError(f"{self.path} line {session.turns[-1].line}: the window holds "
                             f"more than {MAX_WINDOW_REQUESTS:,} requests: replay it a "
                             "--trace-window at a time")  # fmt: skip


def scan_trace(path: Path, window: TraceWindow, speedup: float = 1.0) -> TraceScan:
    """Read the whole trace once, checking every line; what ``window`` of it holds (replayed
    ``speedup`` times faster: which conversations start at one instant, :class:`_Bounds`)."""
    sessions = requests = longest = longest_line = 0
    first: float | None = None
    last: float | None = None
    end = 0.0
    bounds = _Bounds(path, speedup)
    for session in trace_sessions(path):
        if not window.holds(session):
            continue
        bounds.add(session)
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
