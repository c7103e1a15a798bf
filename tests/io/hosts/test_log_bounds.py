"""A service's log tail and its pid record are read bounded (issue 38, the seventeenth hostile
pass): a 2 GB log was read whole to keep its last 1500 bytes (2.16 GB of memory), a log linked
to ``/dev/full`` was read until the machine ran out of memory, a FIFO was waited on forever, and a
500 MB pid record was read whole by ``status``. Real files through a real host, locally and over
the loopback sshd; the memory is this process's own high-water mark (``VmHWM``), which reading
any of them whole would raise by gigabytes."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from servelab.io.hosts.host import Host
from servelab.io.hosts.logs import LOG_NOT_READ, tail
from servelab.io.hosts.processes import (
    MAX_RECORD_BYTES,
    PidRecord,
    read_pid_record,
    write_pid_record,
)

#: A generous bound on what one bounded read may add to this process's peak memory.
BOUND_MB = 300


def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/self/status")


def _sparse(path: Path, size: int, end: bytes = b"") -> None:
    """A file of ``size`` zero bytes (no disk used), then ``end``."""
    with path.open("wb") as out:
        out.truncate(size)
        out.seek(size)
        out.write(end)


@contextlib.contextmanager
def _fifo(path: Path):  # type: ignore[no-untyped-def]
    """A FIFO at ``path``; a reader still waiting on it at the end is let go (opened and
    closed for writing), so a failing test never leaves a thread blocked."""
    os.mkfifo(path)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


async def test_a_2_gb_log_is_read_from_its_end_only(host: Host, tmp_path: Path) -> None:
    log = tmp_path / "web.log"
    _sparse(log, 2 << 30, b"\na cut line\nboom\nexit 3\n")
    before = _peak_mb()
    said = await asyncio.wait_for(tail(host, str(log), max_bytes=14), 60)
    assert said == "boom\nexit 3\n", said  # the line cut by the tail's start left out
    said = await asyncio.wait_for(tail(host, str(log)), 60)
    assert said == "a cut line\nboom\nexit 3\n", said[:80]
    assert _peak_mb() - before < BOUND_MB
    short = tmp_path / "short.log"
    short.write_bytes(b"only line\n")
    assert await tail(host, str(short)) == "only line\n"
    assert await tail(host, str(tmp_path / "none.log")) == ""


async def test_a_device_or_fifo_log_is_never_read_and_says_so(host: Host, tmp_path: Path) -> None:
    linked = tmp_path / "decode.log"
    linked.symlink_to("/dev/full")
    before = _peak_mb()
    with _fifo(tmp_path / "fifo.log") as fifo:
        for path in (str(linked), "/dev/full", "/dev/zero", str(fifo), str(tmp_path)):
            said = await asyncio.wait_for(tail(host, path), 30)
            assert said == LOG_NOT_READ + "\n", (path, said)
    assert _peak_mb() - before < BOUND_MB


def _record(state: Path) -> PidRecord:
    record = PidRecord("web", "local", 4242, 4242, 1, str(state / "logs/web.log"), "now")
    write_pid_record(state, record)
    return record


async def test_a_pid_record_too_large_a_fifo_or_a_device_is_unreadable(tmp_path: Path) -> None:
    state = tmp_path / "state"
    record = _record(state)
    assert read_pid_record(state, "web") == record
    path = state / "run" / "web.json"
    path.unlink()
    _sparse(path, 500 << 20, b"\n")
    before = _peak_mb()
    assert read_pid_record(state, "web") is None
    assert _peak_mb() - before < BOUND_MB
    path.unlink()
    _sparse(path, MAX_RECORD_BYTES + 1)
    assert read_pid_record(state, "web") is None
    path.unlink()
    with _fifo(path):
        got = await asyncio.wait_for(asyncio.to_thread(read_pid_record, state, "web"), 10)
        assert got is None
    path.unlink()
    path.symlink_to("/dev/zero")
    assert read_pid_record(state, "web") is None
    assert _peak_mb() - before < BOUND_MB
