"""A stop signal that lands while ``case test`` launches an arm's decode, before its pid record
is written (issue 38, H8), as real processes on a real simulated stack.

The engine then runs unrecorded: the interrupted step's cleanup finds nothing to stop, and the
put-back raced it for the port (about 1 try in 10 by hand: "address already in use", or the
arm's engine, with the arm's value, answering for the put-back's). Here the race is made
deterministic: the launcher (``sh -s``, found on ``PATH``) is wrapped so that, once armed, it
runs the launch, says so in a file, and waits; the signal is sent then (the engine started, its
record not written). Afterwards the knob is live at its value, every service answers, and the
only process with the decode's mark is the one recorded.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.io.hosts.processes import spec_mark
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.knob import get_knob, live_knob
from tests.support.deployed import deployed
from tests.support.putbacks import FOUND, TARGET, answers, suspect_case
from tests.support.specs import write_pd_spec

#: ``sh`` for servelab's launcher: the first ``sh -s`` after ``arm`` exists runs the launch,
#: writes ``launched`` and waits for ``go`` (bounded: 60 s); every other call is /bin/sh's.
GATED_SH = """\
#!/bin/sh
if [ "$1" = "-s" ] && mv "$GATE_DIR/arm" "$GATE_DIR/armed" 2>/dev/null; then
  /bin/sh "$@"; rc=$?
  : > "$GATE_DIR/launched"
  i=0
  while [ ! -e "$GATE_DIR/go" ] && [ "$i" -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
  exit "$rc"
fi
exec /bin/sh "$@"
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    root = tmp_path_factory.mktemp("race")
    spec = write_pd_spec(root, time_scale=0.05, name="race", knob=FOUND, knobs=(DEFAULT_KNOB,))
    loaded = load_spec(spec)
    with deployed(loaded):
        yield loaded


def _gated_env(gate: Path) -> dict[str, str]:
    bindir = gate / "bin"
    bindir.mkdir(parents=True)
    (bindir / "sh").write_text(GATED_SH)
    (bindir / "sh").chmod(0o755)
    (gate / "arm").write_text("x")
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "GATE_DIR": str(gate)}


def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"never launched: {proc.communicate(timeout=60)[1].decode()}")
        time.sleep(0.02)


def _marked(loaded: LoadedSpec, service: str) -> set[int]:
    """The processes carrying ``service``'s mark (servelab launched them)."""
    mark = f"SERVELAB_SERVICE={spec_mark(loaded, service)}".encode()
    found = set()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if mark in environ.read_bytes().split(b"\0"):
                found.add(int(environ.parent.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


@pytest.mark.timeout(400)
def test_a_signal_while_an_arms_decode_launches_leaves_no_engine_behind(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger_file = tmp_path / "ledger.db"
    cid = suspect_case(ledger_file)
    gate = tmp_path / "gate"
    argv = [sys.executable, "-m", "servelab", "case", "test", cid, TARGET, "--to", "128",
            "--test", "answers@C4", "--rounds", "1", "--runs", "1", "--requests", "64",
            "-f", stack.source, "--ledger", str(ledger_file)]  # fmt: skip
    record = stack.state_dir / "run" / "decode.json"
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_gated_env(gate))  # fmt: skip
    try:
        _wait_for(gate / "launched", proc)  # the arm's decode runs; its record is not written
        assert not record.exists()
        proc.send_signal(signal.SIGINT)
        (gate / "go").write_text("x")  # the launcher returns: the launch is complete
        _out, err_bytes = proc.communicate(timeout=240)
    finally:
        (gate / "go").touch()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    err = " ".join(err_bytes.decode().split())
    assert proc.returncode == 130, err
    assert "stopped; the deployment is as this command found it" in err, err
    assert "Traceback" not in err
    assert asyncio.run(get_knob(stack, "decode", DEFAULT_KNOB)) == FOUND
    assert asyncio.run(live_knob(stack, "decode", DEFAULT_KNOB)) == FOUND, err
    assert [s for s in stack.spec.services if not answers(stack, s)] == [], err
    recorded = json.loads(record.read_text())["pid"]
    assert _marked(stack, "decode") == {recorded}, err  # the arm's engine is gone
