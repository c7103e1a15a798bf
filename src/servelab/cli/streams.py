"""Standard output and standard error that a reader going away cannot stop a command through.

``servelab restart decode 2>&1 | head -1`` closes the pipe after the first line: the next progress
line failed (``BrokenPipeError``; rich answered with ``SystemExit(1)``) and the restart stopped
half way, its router never started again. What a command does to a deployment never depends on
whether anyone still reads what it says, so for the whole process (:func:`kept_streams`, entered
once by :func:`servelab.cli.main`) ``sys.stdout`` and ``sys.stderr`` are :class:`KeptStream` s:
the first write that fails (any ``OSError``: a closed pipe, a full disk, a terminal gone) is
remembered, the stream's descriptor is pointed at ``/dev/null`` (what Python's note on SIGPIPE
advises, so the interpreter's last flush and a write that bypasses the stream do not fail
either), and nothing more is written to it; the command does all its work and records it. Every
writer (the rich consoles, ``click.echo``, ``--json``, click's own usage errors) goes through
``sys.stdout``/``sys.stderr``: this is the one seam.

The exit code, at the very end (:meth:`KeptStreams.unsaid`, :func:`servelab.cli.boundary.said_all`):
a closed pipe (``EPIPE``) keeps the command's own code, which says what it did (0: restarted,
1: failed), never 141: the reader left by choice (``| head -1``), and 141 would make a
``pipefail`` script call a good restart failed and hide a failed one. Any other lost output
(``ENOSPC``, ``EIO``) is output the user wanted and did not get: a command that would have exited
0 says so on stderr and exits 1.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO, cast

__all__ = ["KeptStream", "KeptStreams", "kept_streams"]


class KeptStream:
    """A text stream whose writes cannot fail: after the first that did, ``lost`` holds its error,
    the descriptor writes to ``/dev/null`` and nothing more is written. Everything else (``fileno``,
    ``isatty``, ``encoding``, ``buffer``...) is the wrapped stream's."""

    def __init__(self, stream: TextIO, name: str) -> None:
        self.wrapped = stream
        self.name = name
        self.lost: OSError | None = None

    def write(self, text: str) -> int:
        if self.lost is None:
            try:
                return self.wrapped.write(text)
            except OSError as exc:
                self._lose(exc)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.lost is None:
            try:
                self.wrapped.flush()
            except OSError as exc:
                self._lose(exc)

    def _lose(self, exc: OSError) -> None:
        self.lost = exc
        with contextlib.suppress(OSError, ValueError):  # no descriptor (an embedded use): as is
            target = self.wrapped.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, target)
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


@dataclass
class KeptStreams:
    """The streams of a command while it runs (:func:`kept_streams`): standard output's and
    standard error's (a process started without one, ``>&-``, gets one onto ``/dev/null``:
    :func:`_held`)."""

    out: KeptStream
    err: KeptStream

    def unsaid(self) -> OSError | None:
        """The first output lost otherwise than to a closed pipe (a full disk, a terminal gone),
        as an ``OSError`` naming the stream: the command did its work, but what it said is not
        where the user sent it (None: nothing lost, or only to a reader that left)."""
        for stream in (self.out, self.err):
            lost = stream.lost
            if lost is not None and lost.errno != errno.EPIPE:
                return OSError(lost.errno, lost.strerror or str(lost), stream.name)
        return None


def _held(fd: int) -> TextIO:
    """A text stream onto descriptor ``fd`` for a process Python gave no stream there: the process
    started with it closed (``>&-``), so ``fd`` is first pointed at ``/dev/null``. Held, no file
    servelab opens later (a lock, the ledger) can take the number and receive what is written to
    standard output (a child's inherited output); and what the command says goes nowhere, as the
    user asked, never into a traceback."""
    _hold(fd)
    return open(fd, "w", encoding="utf-8", errors="backslashreplace", closefd=False)


def _hold(fd: int) -> None:
    """Point descriptor ``fd`` at ``/dev/null`` if the process started with it closed."""
    try:
        os.fstat(fd)
    except OSError:  # closed: /dev/null takes its number
        devnull = os.open(os.devnull, os.O_RDWR)
        if devnull != fd:
            os.dup2(devnull, fd)
            os.close(devnull)


def _kept(stream: TextIO | None, fd: int, name: str) -> KeptStream:
    if isinstance(stream, KeptStream):
        return stream
    return KeptStream(_held(fd) if stream is None else stream, name)


@contextlib.contextmanager
def kept_streams() -> Iterator[KeptStreams]:
    """``sys.stdout`` and ``sys.stderr`` as :class:`KeptStream` s for the block, put back after it
    (streams already kept are kept once; a descriptor the process started without is held
    onto ``/dev/null``, :func:`_held`). So is standard input: a process started with it closed
    (``<&-``) reads end of input there, ``sys.stdin`` a stream on it, so a confirmation
    (``click.confirm``) ends as with ``</dev/null`` ("Aborted!"), never "lost sys.stdin"."""
    _hold(0)  # ``<&-``: the first file opened would otherwise be read as standard input
    before = sys.stdout, sys.stderr, sys.stdin
    out, err = _kept(before[0], 1, "standard output"), _kept(before[1], 2, "standard error")
    sys.stdout, sys.stderr = cast("TextIO", out), cast("TextIO", err)
    if before[2] is None:
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    try:
        yield KeptStreams(out, err)
    finally:
        sys.stdout, sys.stderr, sys.stdin = before
