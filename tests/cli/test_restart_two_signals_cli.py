"""``servelab restart -f SPEC decode`` stopped by two signals at once (the twenty-seventh pass,
issue 38): the first cancels the restart, the second stops its cleanup at once, and it said only
"interrupted", naming nothing it left down. Now what is down is read and named, with the command
that brings it back, in text and in ``--json``. Real processes: the simulated workers, the real
sglang-router 0.3.2.

Held deterministically: once the restart launched the new decode (its pid record changed), the
test holds the ledger (``BEGIN IMMEDIATE``) and sends SIGINT; the cancelled restart's cleanup
records it and waits on the ledger, in sqlite's busy wait (its main thread seen asleep in
``/proc``); SIGTERM then, and the ledger let go: the second signal is handled in the cleanup's
own code, as it was when the two came ~50 ms apart.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import free_ports
from tests.support.generic import servelab_in, servelab_process, text_or_empty, up_in
from tests.support.specs import PdPorts, write_pd_spec

_rng = random.Random(os.getpid())


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Path]:
    ports = PdPorts(*free_ports(5, draw=lambda: _rng.randint(20000, 20999)))
    write_pd_spec(tmp_path, ports=ports, time_scale=0.05)
    with up_in(tmp_path):
        yield tmp_path


def _pid(root: Path) -> int | None:
    text = text_or_empty(root / "state" / "run" / "decode.json")
    try:
        return int(json.loads(text)["pid"])
    except (ValueError, KeyError):  # not there, or being written
        return None


#: clock_nanosleep and nanosleep on x86_64 and aarch64: sqlite's busy handler sleeps in them.
_SLEEPS = {"x86_64": (230, 35), "aarch64": (115, 101)}


def _sleeping(pid: int) -> bool:
    """Process ``pid``'s main thread sleeps in a system call (``/proc/PID/syscall``)."""
    try:
        number = Path(f"/proc/{pid}/task/{pid}/syscall").read_text("ascii").split()[0]
    except (OSError, IndexError):
        return False
    return number.isdigit() and int(number) in _SLEEPS.get(os.uname().machine, ())


@pytest.mark.timeout(300)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_restart_stopped_by_two_signals_names_what_it_left_down(stack: Path, as_json: bool) -> None:
    root = stack
    old = _pid(root)
    proc = servelab_process(root, "restart", "decode", "--no-verify",
                            *(["--json"] if as_json else []))  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while _pid(root) in (old, None):  # the new decode launched: the restart is under way
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no new decode seen: {proc.communicate(timeout=60)!r}")
            time.sleep(0.005)
        # the ledger held by this test: the cleanup's record of the restart waits on it (in
        # sqlite, outside the event loop's select), and the second signal is handled in the
        # cleanup's own code once it returns: the cut that said "interrupted" alone
        with contextlib.closing(sqlite3.connect(root / "ledger.db", isolation_level=None)) as held:
            held.execute("BEGIN IMMEDIATE")
            os.kill(proc.pid, signal.SIGINT)
            while not _sleeping(proc.pid):  # sqlite's busy wait: the cleanup is recording
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"no wait on the ledger seen: {proc.communicate(timeout=60)!r}")
                time.sleep(0.005)
            os.kill(proc.pid, signal.SIGTERM)  # the second signal, during that cleanup
            held.execute("ROLLBACK")
        out_b, err_b = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    out, err = out_b.decode(), " ".join(err_b.decode().split())
    assert proc.returncode in (130, 143), err
    assert "Traceback" not in err, err
    recovery = f"servelab up -f {root / 'servelab.toml'}"
    assert "restart interrupted; down: " in err and "put back" not in err, err
    assert "router" in err and f"bring them back with: {recovery}" in err, err
    if as_json:
        doc = json.loads(out)
        assert "router" in doc["down"] and doc["recovery"] == recovery, doc
    assert servelab_in(root, "up")[0] == 0
