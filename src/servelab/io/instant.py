"""Waking an event loop at an exact instant of ``perf_counter_ns()`` without spinning.

An event loop's timers are a millisecond coarse (libuv's, and asyncio's epoll timeout), early or
late, so a replay used to spin the last 1.5 ms before each instant (``asyncio.sleep(0)`` until
the clock came). With ``bench --workers 2`` on two cores both workers spun at every instant: both
cores full, and whatever woke then (the router, at the first write of the other worker's share;
an engine's step) took one of them from a spinner, its share cut for a scheduler slice.

:func:`wait_until` arms a Linux ``timerfd`` on ``CLOCK_MONOTONIC`` (the clock of
``perf_counter_ns()``: one clock) at the instant, absolute, and waits for it to be readable in the
loop: the process sleeps until the instant itself, a high-resolution kernel timer wakes it (within
the thread's timer slack, set to 1 µs from the default 50 µs), and a process that slept is the
one the scheduler runs first. Where there is no ``timerfd`` (not Linux) :func:`available` is
False and callers spin as before (libc is looked up at the first call, not at import).

:func:`held` keeps the thread on its core while it writes the requests of one instant: each
write to a loopback server wakes the server's thread, and the kernel often runs that wakee on the
writer's core at once, cutting the burst after its first request (one process: a burst's second
to last requests left 1-3 ms late, the first on time). Inside the block the thread runs
``SCHED_FIFO`` at the lowest real-time priority, ahead of every ordinary process, where the
process may (root, ``CAP_SYS_NICE`` or an ``RLIMIT_RTPRIO``); elsewhere nothing changes. The
block is synchronous (no ``await`` inside: it ends) and its policy is put back as it was, the
niceness kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import os
import sys
from collections.abc import Iterator
from time import perf_counter_ns

__all__ = ["available", "held", "wait_until"]

_CLOCK_MONOTONIC = 1
_TFD_TIMER_ABSTIME = 1
_TFD_NONBLOCK = os.O_NONBLOCK
_TFD_CLOEXEC = os.O_CLOEXEC
_PR_SET_TIMERSLACK = 29
_SLACK_NS = 1_000
_MAX_NS = 2**63  # a timespec's seconds are a C long


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


@functools.cache
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        # the process's own symbols (libc among them): find_library would run ldconfig, and the
        # first lookup is at a replay's first instant
        libc = ctypes.CDLL(None, use_errno=True)
        create, settime = libc.timerfd_create, libc.timerfd_settime
    except (OSError, AttributeError):
        return None
    create.argtypes, create.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec), ctypes.c_void_p]
    settime.restype = ctypes.c_int
    return libc


def available() -> bool:
    """True where :func:`wait_until` sleeps on a ``timerfd`` (Linux)."""
    return _libc() is not None


def _armed(when_ns: int) -> int:
    """A non-blocking timerfd that becomes readable at ``when_ns`` (``CLOCK_MONOTONIC``)."""
    libc = _libc()
    assert libc is not None
    # this thread's timers fire within 1 µs of their instant, not the default 50 µs slack
    libc.prctl(_PR_SET_TIMERSLACK, ctypes.c_ulong(_SLACK_NS), 0, 0, 0)
    fd = int(libc.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "timerfd_create failed")
    spec = _Itimerspec(_Timespec(0, 0), _Timespec(*divmod(when_ns, 1_000_000_000)))
    if libc.timerfd_settime(fd, _TFD_TIMER_ABSTIME, ctypes.byref(spec), None) != 0:
        err = ctypes.get_errno()
        os.close(fd)
        raise OSError(err, "timerfd_settime failed")
    return fd


async def wait_until(when_ns: int) -> None:
    """Return once ``perf_counter_ns()`` has reached ``when_ns``, the loop woken by the kernel at
    that instant (no spin, no millisecond rounding). Requires :func:`available`; an instant past
    a ``time_t``'s reach is refused (``ValueError``), never truncated into another."""
    if when_ns >= _MAX_NS:
        raise ValueError(f"instant {when_ns} ns is past the clock's reach")
    if when_ns <= perf_counter_ns():  # an it_value of 0 would disarm the timer, not fire it
        return
    fd = _armed(when_ns)
    loop = asyncio.get_running_loop()
    fired = loop.create_future()

    def readable() -> None:
        if not fired.done():
            fired.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await fired
    finally:
        loop.remove_reader(fd)
        os.close(fd)
    while perf_counter_ns() < when_ns:  # never before it (the kernel's timer never fires early)
        await asyncio.sleep(0)


#: The real-time priority :func:`held` runs at: the lowest, ahead of ordinary processes only.
_HOLD_PRIORITY = 1
#: Refused once (no privilege, or no such call): never asked again in this process.
_hold_refused: list[bool] = []


@contextlib.contextmanager
def held() -> Iterator[bool]:
    """Run the (synchronous) block ``SCHED_FIFO`` where permitted: yields True when the thread is
    ahead of ordinary processes in it (it was, or now is), False where the process may not be.
    The policy and its priority are put back as they were when the block ends, however."""
    before = _raised()
    try:
        yield before is not None
    finally:
        if before:
            policy, param = before
            os.sched_setscheduler(0, policy, param)  # a step down: always permitted


def _raised() -> tuple[int, os.sched_param] | tuple[()] | None:
    """Raise this thread to ``SCHED_FIFO``: the policy to put back (empty: it was real-time
    already), or None where it may not."""
    if _hold_refused or not hasattr(os, "sched_setscheduler"):
        return None
    try:
        policy = os.sched_getscheduler(0)
        if policy in (os.SCHED_FIFO, os.SCHED_RR):
            return ()
        param = os.sched_getparam(0)
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(_HOLD_PRIORITY))
    except OSError:  # EPERM: no privilege (a container without CAP_SYS_NICE, a user's shell)
        _hold_refused.append(True)
        return None
    return policy, param
