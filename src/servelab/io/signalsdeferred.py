"""Stop signals held off a few lines that must not be cut in half (a lock's files released
together): :func:`stop_signals_deferred`; and which of them a command may handle at all
(:func:`not_ignored`: one ignored when it started, ``nohup``'s SIGHUP, stays ignored)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["not_ignored", "stop_signals_deferred"]

#: The signals a command stops on (``servelab.cli.boundary.STOP_SIGNALS``).
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def not_ignored(signals: Iterable[int]) -> tuple[int, ...]:
    """The ``signals`` not ignored now (main thread): a command started under ``nohup`` (SIGHUP
    ignored), or in the background by a shell without job control (SIGINT ignored), keeps them
    ignored while it runs; ``servelab.__main__`` leaves such a signal ignored through start-up,
    and every handler a command installs for the stop signals asks this first."""
    return tuple(sig for sig in signals if signal.getsignal(sig) is not signal.SIG_IGN)


@contextlib.contextmanager
def stop_signals_deferred() -> Iterator[None]:
    """For the block, the stop signals are only noted; after it, the handlers there before are
    put back and each noted signal raised again, in the order it came (main thread only)."""
    came: list[int] = []

    def note(signum: int, _frame: object) -> None:
        came.append(signum)

    before: dict[int, Any] = {}
    with contextlib.suppress(ValueError):  # not the main thread: not ours to handle
        for stop in _STOP_SIGNALS:
            before[stop] = signal.signal(stop, note)
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        for signum in came:
            signal.raise_signal(signum)
