"""A second Ctrl-C during ``ab``'s end-of-run restore (issue 38, H3), on a real simulated stack:
the abort names what is really down and what still runs with which value, read from the
processes (never assumed from the step the signal cut), and the command it gives puts the
deployment back; ``up`` of a service already up but running another value than its file's says
so, naming the knob, both values and the restart that applies the file.

The first signal is sent once the line "restoring decode" is printed, the second once the
put-back has stopped the router (it stops dependents first): conditions, never times.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.io.specfile import LoadedSpec
from servelab.ops.knob import diff_knob, get_knob
from tests.support import run_cli
from tests.support.putbacks import FOUND, answers, pd_stack

CANDIDATE = "1024"
LOAD = ("--concurrency", "2", "--requests", "10", "--repeat", "1", "--warmup", "1",
        "--output-len", "8", "--input-len", "32", "--answers", "off")  # fmt: skip


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    yield from pd_stack(tmp_path_factory, "restoreabort")


def _lines(stream: IO[bytes], into: queue.Queue[str | None]) -> None:
    for raw in stream:
        into.put(raw.decode(errors="replace"))
    into.put(None)


def _wait_line(lines: queue.Queue[str | None], seen: list[str], text: str) -> None:
    """Wait (bounded) for a stderr line holding ``text``; every line read kept in ``seen``."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        if line is None:
            pytest.fail(f"the command ended before {text!r}: {''.join(seen)}")
        seen.append(line)
        if text in line:
            return
    pytest.fail(f"no {text!r} in four minutes: {''.join(seen)}")


def _until_down(loaded: LoadedSpec, service: str, proc: subprocess.Popen[bytes]) -> None:
    """Wait (bounded) until ``service`` stops answering /health, or the command ends."""
    deadline = time.monotonic() + 120
    while answers(loaded, service) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.mark.timeout(500)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_second_ctrl_c_during_the_restore_says_what_really_runs(
    stack: LoadedSpec, tmp_path: Path, as_json: bool
) -> None:
    argv = [sys.executable, "-m", "servelab", "ab", "-f", stack.source, "--ledger",
            str(tmp_path / "ledger.db"), "--knob", f"decode:{DEFAULT_KNOB}=256,{CANDIDATE}",
            *LOAD, *(("--json",) if as_json else ())]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ)
    assert proc.stderr is not None
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        _wait_line(lines, seen, "restoring decode")
        proc.send_signal(signal.SIGINT)
        _until_down(stack, "router", proc)  # the put-back under way: the router stopped first
        proc.send_signal(signal.SIGINT)
        # stdout read apart: communicate() would read stderr too, racing the reader for its
        # last lines (the put-back's words, printed after the second signal)
        pipe = proc.stdout
        assert pipe is not None
        outs: list[bytes] = []
        stdout = threading.Thread(target=lambda: outs.append(pipe.read()), daemon=True)
        stdout.start()
        proc.wait(timeout=240)
        stdout.join(timeout=60)
        out = b"".join(outs).decode()
        reader.join(timeout=60)
        pipe.close()
        proc.stderr.close()
        while (line := lines.get_nowait()) is not None:
            seen.append(line)
        err = " ".join("".join(seen).split())
        assert proc.returncode == 130, (err, out)
        assert "Traceback" not in err
        diff = asyncio.run(diff_knob(stack, "decode", DEFAULT_KNOB))
        assert diff.file == FOUND  # written back before the put-back's co-restart
        down = [s for s in stack.spec.services if not answers(stack, s)]
        candidate = diff.running and diff.live != diff.file  # the cut left it running
        spec = f"-f {stack.source}"
        if not as_json:
            assert "stopped; the deployment is NOT as this command found it" in err
            assert "a second signal stopped putting it back" in err
            if candidate:
                said = f"decode: still running {DEFAULT_KNOB}={diff.live} (file: {FOUND})"
                assert said in err
                assert f"put back with: servelab restart {spec} decode" in err
                assert "down: decode" not in err
                for service in down:
                    assert f"{service}: down" in err
            elif down:
                assert f"down: {', '.join(down)}; bring them back with: servelab up {spec}" in err
        else:
            doc = json.loads(out)
            assert doc["down"] == down and doc["exit_code"] == 130
            put = doc["put_back"]
            assert put["interrupted"] is True and put["ok"] is False
            still = [] if not candidate else [
                {"service": "decode", "knob": DEFAULT_KNOB, "live": diff.live, "file": FOUND,
                 "read": True}
            ]  # fmt: skip
            assert put["still_live"] == still
            if doc["recovery"] is not None:  # what it says to run puts it back
                fix = doc["recovery"].split()
                assert fix[:2] == (["servelab", "restart"] if candidate else ["servelab", "up"])
                assert run_cli(*fix[1:], timeout=300).returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        assert run_cli("restart", "-f", stack.source, "decode", timeout=300).returncode == 0
    assert asyncio.run(get_knob(stack, "decode", DEFAULT_KNOB)) == FOUND
    assert asyncio.run(diff_knob(stack, "decode", DEFAULT_KNOB)).live == FOUND
    assert [s for s in stack.spec.services if not answers(stack, s)] == []


@pytest.mark.timeout(300)
def test_up_of_a_service_already_up_with_another_value_than_its_file_warns(
    stack: LoadedSpec,
) -> None:
    setting = f"{DEFAULT_KNOB}={CANDIDATE}"
    assert run_cli("knob", "set", "-f", stack.source, "decode", setting).returncode == 0
    try:
        done = run_cli("up", "-f", stack.source, timeout=300)
        assert done.returncode == 0, done.stderr
        err = " ".join(done.stderr.split())
        assert "decode: already up" in err
        assert (
            f"warning: decode runs {DEFAULT_KNOB}={FOUND}, its file says {CANDIDATE}; apply the "
            f"file with: servelab restart -f {stack.source} decode"
        ) in err
        assert "warning: router" not in err  # no knob of its own: nothing to warn about
    finally:
        back = f"{DEFAULT_KNOB}={FOUND}"
        assert run_cli("knob", "set", "-f", stack.source, "decode", back).returncode == 0
    again = run_cli("up", "-f", stack.source, timeout=300)
    assert again.returncode == 0 and "warning" not in again.stderr, again.stderr
