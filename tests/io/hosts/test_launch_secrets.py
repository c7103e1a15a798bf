"""A launch never puts env values on a command line (``ps``), nor in an error it raises.

The launch is held on purpose: the service's log is a FIFO, so the launcher blocks opening it for
append until the test opens it for reading. Meanwhile every ``/proc/*/cmdline`` on this machine
(the loopback sshd's sessions included) is read, and the launch is let to time out.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from pathlib import Path

import pytest

from servelab.core.knobs.envfile import parse_environ
from servelab.errors import CommandTimeout
from servelab.io.hosts.host import Host
from servelab.io.hosts.processes import spawn, stop_record

PLANTED = "sk-live-4f9a2c7e1b"  # under an ordinary name: no redaction by name catches it
ENV = {"MODEL_CACHE_KEY": PLANTED, "PATH_HINT": f"hf_{PLANTED}", "PLAIN": "a b'c\"d$e"}


def _cmdlines_holding(value: str) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            if value.encode() in raw:
                found.append(f"{entry}: {raw[:200]!r}")
    return found


async def test_a_held_launch_shows_no_value_in_ps_and_times_out_cleanly(
    host: Host, tmp_path: Path
) -> None:
    log = tmp_path / "logs" / "held.log"
    log.parent.mkdir()
    os.mkfifo(log)
    task = asyncio.create_task(
        spawn(
            host,
            service="held",
            log=str(log),
            env=ENV,
            argv=[sys.executable, "-c", "pass"],
            launch_timeout_s=3.0,
        )
    )
    try:
        await asyncio.sleep(1.0)  # the launcher is blocked on the FIFO by now
        assert not task.done()
        assert _cmdlines_holding(PLANTED) == []
        with pytest.raises(CommandTimeout) as info:
            await task
    finally:
        # release a launcher still blocked remotely (the SSH channel closed, its shell may linger)
        reader = os.open(log, os.O_RDONLY | os.O_NONBLOCK)
        await asyncio.sleep(0.5)
        os.close(reader)
    message = str(info.value)
    assert PLANTED not in message and "MODEL_CACHE_KEY" not in message
    assert message.startswith("held: ") and "3.0" in message


async def test_values_reach_the_service_environment_exactly(host: Host, tmp_path: Path) -> None:
    script = "import time; print('up', flush=True); time.sleep(30)"
    record = await spawn(
        host,
        service="envy",
        log=str(tmp_path / "envy.log"),
        env=ENV,
        argv=[sys.executable, "-c", script],
    )
    log = tmp_path / "envy.log"
    try:
        for _ in range(200):  # the environment is the service's once it said so
            if log.exists() and "up" in log.read_text().split("\n", 1)[-1]:
                break
            await asyncio.sleep(0.05)
        environ = parse_environ(await host.read_environ(record.pid))
        assert {name: environ.get(name) for name in ENV} == ENV
        assert _cmdlines_holding(PLANTED) == []
    finally:
        await stop_record(host, record, grace=2)
