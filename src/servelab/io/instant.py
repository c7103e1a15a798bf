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
process may (root, ``CAP_SYS_NICE`` or an ``RLIMIT_RTPRIO``) and was not put behind on purpose
(a positive niceness, a batch or idle policy); elsewhere nothing changes. The block is
synchronous (no ``await`` inside: it ends) and the ordinary policy is put back, the niceness
kept.
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
#: ``sched_getscheduler``'s flag on a policy the process keeps only until it forks.
_RESET_ON_FORK = 0x40000000
_SCHED_DEADLINE = 6


@contextlib.contextmanager
def held() -> Iterator[bool]:
    """Run the (synchronous) block ``SCHED_FIFO`` where permitted: yields True when the thread is
    ahead of ordinary processes in it (it was already real-time, or now is), False where it is
    not (no privilege; or put behind on purpose: a positive niceness, ``SCHED_BATCH`` or
    ``SCHED_IDLE``; any policy but the ordinary one is left as it is). The ordinary policy is
    put back when the block ends, however it ends, the niceness kept."""
    ahead, raised = _raised()
    try:
        yield ahead
    finally:
        if raised:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))  # a step down: permitted


def _raised() -> tuple[bool, bool]:
    """(ahead, raised here): raise this thread to ``SCHED_FIFO`` from the ordinary policy at a
    niceness of 0 or less; any other policy (real-time, deadline, batch, idle, one with the
    reset-on-fork flag) or a positive niceness is left as the user set it."""
    if _hold_refused or not hasattr(os, "sched_setscheduler"):
        return False, False
    try:
        policy = os.sched_getscheduler(0)
        if policy != os.SCHED_OTHER or os.getpriority(os.PRIO_PROCESS, 0) > 0:
            real_time = policy & ~_RESET_ON_FORK in (os.SCHED_FIFO, os.SCHED_RR, _SCHED_DEADLINE)
            return real_time, False
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(_HOLD_PRIORITY))
    except OSError:  # EPERM: no privilege (a container without CAP_SYS_NICE, a user's shell)
        _hold_refused.append(True)
        return False, False
    return True, True
