"""A lock's files are released together: a stop signal that comes as the first is released
waits until the last is free (the thirtieth pass: a signal landing as ``restart`` ended cut the
release in half, the files left naming the process, and the next command said it "took over"
the lock). The process sends itself a real SIGINT the moment it truncates its first lock file."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from servelab.io.lock import LOCK_FILE, TRAFFIC_FILE, endpoint_dir, hold, holder_of


def test_a_signal_during_the_release_waits_until_every_file_is_free(tmp_path: Path) -> None:
    state, root = tmp_path / "state", tmp_path / "locks"
    state.mkdir()
    endpoints = [("127.0.0.1", 20000 + n) for n in range(3)]
    places = [state, *(endpoint_dir(root, machine, port) for machine, port in endpoints)]
    sent: list[int] = []

    def at_the_first_truncate(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call" and arg is os.ftruncate and not sent:
            sent.append(signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with hold(state, "servelab restart", name="t", endpoints=endpoints, root=root):
                assert all(holder_of(place) is not None for place in places)
                sys.setprofile(at_the_first_truncate)
            sys.setprofile(None)
    finally:
        sys.setprofile(None)
        signal.signal(signal.SIGINT, previous)
    assert sent == [signal.SIGINT]  # the signal came, and stopped the block, after the release
    left = [(place, file) for place in places for file in (LOCK_FILE, TRAFFIC_FILE)
            if holder_of(place, file) is not None]  # fmt: skip
    assert left == []  # no file left naming this process: nothing for the next to take over
    with hold(state, "servelab up", name="t", endpoints=endpoints, root=root) as lock:
        assert lock.taken_over is None
