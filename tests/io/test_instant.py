"""The kernel-timer wait (``io/instant.py``) on the loops servelab runs (asyncio's and uvloop's):
never before its instant, asleep until it (the thread blocks: a voluntary context switch, where
a spin has none), its descriptor closed however the wait ends."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from time import perf_counter_ns
from typing import Any

import pytest
import uvloop

from servelab.io import instant

pytestmark = pytest.mark.skipif(not instant.available(), reason="no timerfd on this platform")

LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def _run(loop: str, main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        runner.run(main())


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_wakes_at_or_after_the_instant_asleep_until_it(loop: str) -> None:
    async def main() -> None:
        before = _fds()
        woke: list[int] = []
        switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
        for _ in range(20):
            due = perf_counter_ns() + 5_000_000
            await instant.wait_until(due)
            woke.append(perf_counter_ns() - due)
        slept = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - switches
        assert min(woke) >= 0
        # the thread blocked in the waits (a spin never blocks); on a busy machine a wait whose
        # instant passed while the process was not running returns without blocking
        assert slept >= 10
        assert _fds() == before
        slack = "/proc/self/timerslack_ns"  # the main thread's: this one's
        assert not os.path.exists(slack) or Path(slack).read_text().strip() == "1000"

    _run(loop, main)


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_past_instant_returns_at_once_and_a_cancelled_wait_closes_its_fd(loop: str) -> None:
    async def main() -> None:
        before = _fds()
        await instant.wait_until(perf_counter_ns() - 1)
        await instant.wait_until(0)
        waits = [asyncio.create_task(instant.wait_until(perf_counter_ns() + 10**11))
                 for _ in range(300)]  # fmt: skip
        await asyncio.sleep(0.01)
        assert _fds() >= before + 300  # each armed on a descriptor of its own
        for wait in waits:
            wait.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
        assert all(wait.cancelled() for wait in waits)
        assert _fds() == before

    _run(loop, main)


def test_an_instant_past_the_clocks_reach_is_refused_not_truncated() -> None:
    async def main() -> None:
        for when in (2**63, 2**80, 10**308):
            with pytest.raises(ValueError, match="past the clock's reach"):
                await instant.wait_until(when)

    _run("asyncio", main)


#: A child process that enters :func:`instant.held` at the niceness of its first argument, raises
#: inside it, and prints what it yielded and its policy and niceness inside and after it.
_HELD_CHILD = """
import json, os, sys
from servelab.io import instant
os.nice(int(sys.argv[1]))
seen = {}
try:
    with instant.held() as ahead:
        seen["ahead"] = ahead
        seen["inside"] = os.sched_getscheduler(0)
        raise KeyboardInterrupt
except KeyboardInterrupt:
    pass
seen["after"] = os.sched_getscheduler(0)
seen["nice"] = os.nice(0)
with instant.held() as again:
    seen["again"] = again
print(json.dumps(seen))
"""


def _may_raise() -> bool:
    """Whether this process may run ``SCHED_FIFO``: ``CAP_SYS_NICE`` (bit 23) or an RTPRIO."""
    status = Path("/proc/self/status").read_text().splitlines()
    caps = next(line for line in status if line.startswith("CapEff"))
    rtprio = resource.getrlimit(resource.RLIMIT_RTPRIO)[0]
    return bool(int(caps.split()[1], 16) >> 23 & 1) or rtprio > 0


def _held_child(*prefix: str, nice: int = 0) -> dict[str, Any]:
    out = subprocess.run([*prefix, sys.executable, "-c", _HELD_CHILD, str(nice)],
                         capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    return dict(json.loads(out.stdout))


def _needs_the_privilege() -> None:
    if not _may_raise():
        pytest.fail("this test needs CAP_SYS_NICE (CI runs as root)")


def test_held_runs_the_block_ahead_and_puts_the_policy_back() -> None:
    _needs_the_privilege()
    seen = _held_child(nice=-2)
    assert seen == {"ahead": True, "inside": os.SCHED_FIFO, "after": os.SCHED_OTHER, "nice": -2,
                    "again": True}  # fmt: skip  # put back though the block raised


def test_held_without_the_privilege_changes_nothing() -> None:
    seen = _held_child("setpriv", "--inh-caps=-sys_nice", "--bounding-set=-sys_nice")
    assert seen == {"ahead": False, "inside": os.SCHED_OTHER, "after": os.SCHED_OTHER, "nice": 0,
                    "again": False}  # fmt: skip


def test_held_leaves_a_thread_put_behind_on_purpose_behind() -> None:
    """The thirty-third pass: ``nice -n 10``, ``chrt -b``, ``chrt -i`` ran the burst's writes
    ahead of everything all the same."""
    _needs_the_privilege()
    niced = _held_child(nice=3)
    assert niced == {"ahead": False, "inside": os.SCHED_OTHER, "after": os.SCHED_OTHER,
                     "nice": 3, "again": False}  # fmt: skip
    for flag, policy in (("-b", os.SCHED_BATCH), ("-i", os.SCHED_IDLE)):
        seen = _held_child("chrt", flag, "0")
        assert (seen["ahead"], seen["inside"], seen["after"]) == (False, policy, policy), flag


@pytest.mark.parametrize(
    ("chrt", "expected"),
    [
        (("-r", "2"), "2 2"),  # SCHED_RR 2
        (("-R", "-f", "5"), "1073741825 5"),  # FIFO 5 with the reset-on-fork flag
        (
            (
                "-d",
                "--sched-runtime",
                "5000000",
                "--sched-deadline",
                "10000000",
                "--sched-period",
                "10000000",
                "0",
            ),
            "6 0",
        ),  # SCHED_DEADLINE
    ],
)
def test_held_inside_a_real_time_thread_leaves_its_policy(
    chrt: tuple[str, ...], expected: str
) -> None:
    """The thirty-third pass: under ``chrt -R -f 5`` the hold ran at priority 1 (the flag hid
    the policy); under ``SCHED_DEADLINE`` its put-back failed and left the thread FIFO."""
    _needs_the_privilege()
    code = (
        "import os; from servelab.io import instant\n"
        "with instant.held() as ahead: inside = os.sched_getscheduler(0)\n"
        "print(ahead, inside, os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)"
    )
    out = subprocess.run(["chrt", *chrt, sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=60, check=True)  # fmt: skip
    policy, priority = expected.split()
    assert out.stdout.split() == ["True", policy, policy, priority]
