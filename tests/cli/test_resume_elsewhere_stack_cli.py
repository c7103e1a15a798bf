"""The hostile pass's H2 on a real simulated stack (issue 38): an A/B of dep-a Ctrl-C'd during its
second visit (one visit journalled), then ``ab --resume`` from dep-b sharing the ledger: refused
(exit 2) before anything is restarted, measured or written; dep-b's file keeps its value. The
signal is sent once the second visit's line is printed: a condition, never a time. (dep-b's own
service cannot start: a resume that got past the check would fail its restart, exit 1.)"""

from __future__ import annotations

import queue
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB as K
from servelab.io.ledger.journal import AbJournal, SessionStatus
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec
from tests.support import run_cli
from tests.support.putbacks import FOUND, as_found, pd_stack, start
from tests.support.unstartable import unstartable_spec

LOAD = ("--concurrency", "2", "--requests", "10", "--repeat", "2", "--warmup", "1",
        "--output-len", "8", "--input-len", "32", "--answers", "off",
        "--keep", "baseline")  # fmt: skip


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    yield from pd_stack(tmp_path_factory, "dep-a")


def _lines(stream: IO[bytes], into: queue.Queue[str | None]) -> None:
    for raw in stream:
        into.put(raw.decode(errors="replace"))
    into.put(None)


@pytest.mark.timeout(600)
def test_an_ab_ctrl_c_d_in_dep_a_is_not_resumed_from_dep_b(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger_file = tmp_path / "shared.db"
    proc = start(stack, ledger_file, "ab", "--knob", f"decode:{K}={FOUND},256", *LOAD)
    assert proc.stderr is not None
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 300
        while not any(f"arm {K}=256" in line for line in seen):  # the second visit began
            assert time.monotonic() < deadline, "".join(seen)
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, "".join(seen)
            seen.append(line)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=240) == 130, "".join(seen)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(timeout=60)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    as_found(stack)  # the original put back
    with Ledger.open(ledger_file) as ledger:
        session = AbJournal(ledger).get(1)
    assert session is not None and session.status == SessionStatus.INTERRUPTED
    assert len(session.visits) == 1 and session.original == FOUND
    other = unstartable_spec(tmp_path / "b", "dep-b", "1024")
    done = run_cli("ab", "--resume", "1", "-f", str(other), "--ledger", str(ledger_file))
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, said
    assert f"A/B 1 was dep-a's (spec {stack.source}); resume it with -f {stack.source}" in said
    assert "resuming" not in said
    assert (tmp_path / "b" / "decode.env").read_text() == f"{K}=1024\n"
    with Ledger.open(ledger_file) as ledger:
        after = AbJournal(ledger).get(1)
    assert after is not None and len(after.visits) == 1  # nothing measured
    as_found(stack)
