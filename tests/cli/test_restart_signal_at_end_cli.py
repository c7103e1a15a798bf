"""``servelab restart -f SPEC decode`` with a stop signal landing as it ends, after its work (the
thirtieth pass): it exited by a later signal's code with no summary, or said "interrupted"
alone. Now it prints the summary of what it did, exits by the first signal's code (128 + its
number) and releases its lock (the next command takes it without "took over"). Real processes:
the simulated workers behind the real router.

Held deterministically, two moments:

- its last step, the ledger's record of the restart: the test holds the ledger (``BEGIN
  IMMEDIATE``) once the new decode launched; the restart, done, waits on it in sqlite's busy wait
  (its main thread seen asleep in ``/proc``); SIGINT then, and the ledger let go: the signal
  cancels what is left of the command's coroutine (its operation's close);
- its report: its standard output is a pipe this test filled beforehand, so it waits in
  ``write(2)`` on its first line; held there (SIGSTOP), it gets SIGINT and SIGTERM, SIGCONT (the
  handlers run in signal-number order: SIGINT's first), and the pipe is read.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import free_ports
from tests.support.generic import servelab_in, text_or_empty, up_in
from tests.support.specs import PdPorts, write_pd_spec

_rng = random.Random(os.getpid())

#: write(2) on x86_64 and aarch64; clock_nanosleep and nanosleep (sqlite's busy wait).
_WRITE = {"x86_64": 1, "aarch64": 64}
_SLEEPS = {"x86_64": (230, 35), "aarch64": (115, 101)}


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Path]:
    ports = PdPorts(*free_ports(5, draw=lambda: _rng.randint(20000, 20999)))
    write_pd_spec(tmp_path, ports=ports, time_scale=0.05)
    with up_in(tmp_path):
        yield tmp_path


def _pid(root: Path) -> int | None:
    try:
        return int(json.loads(text_or_empty(root / "state" / "run" / "decode.json"))["pid"])
    except (ValueError, KeyError):  # not there, or being written
        return None


def _syscall(pid: int) -> list[str]:
    """The system call process ``pid``'s main thread waits in, and its arguments."""
    try:
        return Path(f"/proc/{pid}/task/{pid}/syscall").read_text("ascii").split()
    except OSError:
        return []


def _restart(root: Path, stdout: int, stderr: Path, as_json: bool) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SERVELAB_LEDGER": str(root / "ledger.db")}
    argv = [sys.executable, "-m", "servelab", "restart", "decode", "--no-verify"]
    with stderr.open("wb") as err:
        return subprocess.Popen([*argv, *(["--json"] if as_json else [])], cwd=root, env=env,
                                stdout=stdout, stderr=err)  # fmt: skip


def _wait(proc: subprocess.Popen[bytes], until: object, what: str) -> None:
    deadline = time.monotonic() + 120
    while not until():  # type: ignore[operator]
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"{what} not seen (exit {proc.poll()})")
        time.sleep(0.005)


def _next_takes_the_lock(root: Path) -> None:
    code, _, err = servelab_in(root, "restart", "decode", "--no-verify")
    assert code == 0, err
    assert "took over" not in err, err


@pytest.mark.timeout(300)
def test_a_signal_during_its_last_record_still_prints_the_summary(stack: Path) -> None:
    root, old = stack, _pid(stack)
    said = root / "stderr"
    proc = _restart(root, subprocess.PIPE, said, as_json=False)
    try:
        _wait(proc, lambda: _pid(root) not in (old, None), "the new decode")
        with contextlib.closing(sqlite3.connect(root / "ledger.db", isolation_level=None)) as held:
            held.execute("BEGIN IMMEDIATE")

            def recording() -> bool:
                call = _syscall(proc.pid)
                return bool(call) and call[0].isdigit() and \
                    int(call[0]) in _SLEEPS.get(os.uname().machine, ())  # fmt: skip

            _wait(proc, recording, "the restart's record waiting on the ledger")
            os.kill(proc.pid, signal.SIGINT)
            held.execute("ROLLBACK")
        out_b, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    out, err = out_b.decode(), " ".join(said.read_text().split())
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err, err
    assert "restart: ok" in out and "decode" in out, (out, err)
    assert err.endswith("interrupted"), err
    _next_takes_the_lock(root)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_two_signals_during_its_report_exit_by_the_first_after_the_summary(
    stack: Path, as_json: bool
) -> None:
    root = stack
    said = root / "stderr"
    read, write = os.pipe()
    flags = fcntl.fcntl(write, fcntl.F_GETFL)
    fcntl.fcntl(write, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    filler = 0
    with contextlib.suppress(BlockingIOError):
        while True:  # the pipe filled: the restart's first line waits in write(2)
            filler += os.write(write, b"." * 4096)
    fcntl.fcntl(write, fcntl.F_SETFL, flags)  # the restart's own writes block
    proc = _restart(root, write, said, as_json)
    os.close(write)
    try:
        machine = os.uname().machine

        def writing() -> bool:
            call = _syscall(proc.pid)
            return len(call) > 1 and call[0] == str(_WRITE.get(machine)) and call[1] == "0x1"

        _wait(proc, writing, "the report's write")
        os.kill(proc.pid, signal.SIGSTOP)
        os.kill(proc.pid, signal.SIGINT)
        os.kill(proc.pid, signal.SIGTERM)
        os.kill(proc.pid, signal.SIGCONT)
        with os.fdopen(read, "rb") as pipe:
            out = pipe.read()[filler:].decode()
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = " ".join(said.read_text().split())
    assert proc.returncode == 130, (out, err)  # SIGINT's, the first handled
    assert "Traceback" not in err, err
    if as_json:
        doc = json.loads(out)
        assert doc["plan"] == ["decode", "router"] and doc["down"] == [], doc
    else:
        assert "restart: ok" in out, (out, err)
    assert err.endswith("interrupted"), err
    _next_takes_the_lock(root)
