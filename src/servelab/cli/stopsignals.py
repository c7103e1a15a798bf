"""Which stop signals a command received, first first (its exit code is the first's: 128 + its
number), and who takes the second (:func:`second_signal_to`): the part of
:func:`servelab.cli.boundary.run` that wraps the event loop's own SIGINT handler; and the loop's
report of CPython 3.11's ``sock_connect`` race on a stop (:func:`connect_race`), and of a task a
second stop signal ended (:func:`stop_in_task`), kept off stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from servelab.io.signalsdeferred import not_ignored

__all__ = [
    "connect_race",
    "hold_from_now",
    "holding",
    "holding_once_done",
    "ignoring_stop_signals",
    "offering_second",
    "received",
    "second_signal_to",
    "stop_in_task",
]

T = TypeVar("T")

#: The signals a command stops on as on Ctrl-C (``servelab.cli.boundary.STOP_SIGNALS``).
_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

#: The stop signals received since the current command began, first first.
received: list[int] = []

#: Whether a command's work is done (:func:`hold_from_now`): a stop signal is then only noted.
_hold = [False]

#: Who takes a second stop signal in :func:`~servelab.cli.boundary.run`, if anyone.
_second: ContextVar[Callable[[], bool] | None] = ContextVar("servelab_second", default=None)


@contextmanager
def second_signal_to(take: Callable[[], bool]) -> Iterator[None]:
    """For the block, a :func:`~servelab.cli.boundary.run` whose first stop signal cancelled its
    coroutine offers the second to ``take`` (True: taken, the command goes on stopping; False: it
    stops at once, as it does without); a third stops at once."""
    token = _second.set(take)
    try:
        yield
    finally:
        _second.reset(token)


async def offering_second(coro: Coroutine[Any, Any, T]) -> T:
    """``coro``, a second stop signal offered to who takes it first (:func:`second_signal_to`):
    the loop's own SIGINT handler (the first cancels, the next stops at once) wrapped; a SIGINT
    noted among the signals received (SIGTERM's and SIGHUP's handler notes theirs), so the exit
    code is the first signal's."""
    take = _second.get() or _refused
    loops, count = signal.getsignal(signal.SIGINT), 0

    def offered(signum: int, frame: Any) -> None:
        nonlocal count
        if signum == signal.SIGINT:
            received.append(signum)
        if _hold[0]:  # the work is done: noted, its report still said
            return
        count += 1
        if count == 2 and take():
            return
        if callable(loops):
            loops(signum, frame)

    with contextlib.suppress(ValueError):  # not the main thread: not ours
        if not_ignored((signal.SIGINT,)):  # ignored at the start (a background job): it stays
            signal.signal(signal.SIGINT, offered)
    asyncio.get_running_loop().set_exception_handler(_unless_connect_race)
    return await coro


def hold_from_now() -> None:
    """The command's work is done: until the end of :func:`holding_once_done`'s block, a stop
    signal is only noted in :data:`received` (its report is still printed, its lock released,
    and it exits by the first signal's code), never acted on."""
    _hold[0] = True


def holding() -> bool:
    """Whether stop signals are only noted now (:func:`hold_from_now`)."""
    return _hold[0]


@contextmanager
def holding_once_done() -> Iterator[None]:
    """The block in which :func:`hold_from_now` holds stop signals (from its call to the block's
    end)."""
    _hold[0] = False
    try:
        yield
    finally:
        _hold[0] = False


def connect_race(context: Mapping[str, object]) -> bool:
    """The event loop's report is CPython 3.11's race in ``sock_connect``: a connection refused
    after a stop cancelled its wait sets the future's exception twice (``InvalidStateError`` in
    ``_sock_connect_cb``); nothing was lost, and its traceback must not reach the user."""
    exc, handle = context.get("exception"), context.get("handle")
    return isinstance(exc, asyncio.InvalidStateError) and "_sock_connect_cb" in repr(handle)


def stop_in_task(context: Mapping[str, object]) -> bool:
    """The event loop's report is a task that a stop signal's ``KeyboardInterrupt`` ended (the
    loop's own SIGINT handler raises it at the second signal, inside whichever task runs: a
    subprocess's pipes being connected), its exception never retrieved: the command said it was
    stopped, and the traceback must not reach the user."""
    return isinstance(context.get("exception"), KeyboardInterrupt) and "never retrieved" in str(
        context.get("message", "")
    )


def _unless_connect_race(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
    if not connect_race(context) and not stop_in_task(context):
        loop.default_exception_handler(context)


def _refused() -> bool:
    """Nobody takes a second signal: it stops at once."""
    return False


@contextmanager
def ignoring_stop_signals() -> Iterator[None]:
    """For the block (a stopped command saying what it left, then exiting by the first signal's
    code), further stop signals are ignored: a late one would end the process by its own
    default action and code (main thread only; the dispositions before are put back after)."""
    before: dict[int, Any] = {}
    with contextlib.suppress(ValueError):  # not the main thread: not ours
        for sig in _STOPS:
            before[sig] = signal.signal(sig, signal.SIG_IGN)
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
