"""Ctrl-C at a terminal (SIGINT to the whole process group) while ``servelab investigate``'s knob
experiment co-restarts the decode and the router, on a real simulated stack: the command either
puts the deployment back as it found it (every service answering) or names what is down and the
command that brings it back; never the router left down and unnamed (issue 38).

``investigate`` runs in a process group of its own, as a terminal's foreground job; the test waits
(reading its stderr) for the arm's ``decode: started pid`` line, then signals the group at one of
a few delays after it (the window is a moment wide: the router being started), bounded. A stop
where no put-back runs (Ctrl-C in the reproducing soak, the router gone meanwhile) reads the
services and names the router down with ``servelab up`` (on main: "interrupted", nothing named).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.case import case as cases
from servelab.ops.context import Operation
from servelab.ops.deploy import deploy
from servelab.ops.knob import set_knob
from servelab.ops.verify.verify import verify
from tests.support import free_ports, run_cli
from tests.support.deployed import deployed
from tests.support.putbacks import answers
from tests.support.specs import PdPorts, write_pd_spec

TILE = "SGLANG_SM120_MLA_KV_TILE"
#: When the group is signalled: seconds after the arm's ``decode: started pid`` line (the decode
#: being started: its ready check takes about 0.5 s here), then each next SIGINT this much after
#: the one before: one Ctrl-C, or two (an impatient operator; Python runs its handler once for
#: signals that arrive together, so the second comes a moment later: while the cut launch is
#: stopped, before the put-back takes the signals over).
TRIES = ((0.05, ()), (0.1, (0.05,)))
_rng = random.Random(os.getpid())


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    root = tmp_path_factory.mktemp("invint")
    ports = PdPorts(*free_ports(5, draw=lambda: _rng.randint(25000, 25499)))
    spec = write_pd_spec(root, ports=ports, time_scale=0.05, name="invint", knobs=(TILE,),
                         worker_env="SERVELAB_SIM_WARMUP_S=0\n")  # fmt: skip
    loaded = load_spec(spec)
    with deployed(loaded):
        yield loaded


async def _incident(stack: LoadedSpec, ledger: Ledger) -> int:
    """Verified good (the tile unset); the tile set to 16 (the simulator's long-context hang),
    recorded and co-restarted; a case opened."""
    async with Operation(stack, ledger=ledger) as op:
        await set_knob(op, "decode", TILE, None, reason="good")
        await deploy.restart(op, ["decode"], verify_after=False)
    assert (await verify(stack, ledger=ledger)).ok
    async with Operation(stack, ledger=ledger) as op:
        await set_knob(op, "decode", TILE, "16", reason="tuning")
        await deploy.restart(op, ["decode"], verify_after=False)
    return cases.open_case(ledger, "long sessions hang")


def _interrupted(
    stack: LoadedSpec, ledger_file: Path, cid: int, delay: float, gaps: tuple[float, ...]
) -> tuple[int, str]:
    """``investigate`` in its own process group, SIGINT to the group ``delay`` s after its first
    arm's ``decode: started pid`` line, and again after each of ``gaps``; exit code, stderr."""
    argv = [sys.executable, "-m", "servelab", "investigate", "-f", stack.source, "--ledger",
            str(ledger_file), "--case", str(cid), "--symptom", "hang", "--yes", "--sessions", "4",
            "--rounds", "2", "--idle-timeout", "3", "--duration", "60"]  # fmt: skip
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          start_new_session=True) as proc:  # fmt: skip
        return _signalled(proc, delay, gaps)


def _signalled(
    proc: subprocess.Popen[bytes], delay: float, gaps: tuple[float, ...]
) -> tuple[int, str]:
    lines: list[str] = []
    armed = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        in_visit = False
        for raw in proc.stderr:
            line = raw.decode(errors="replace")
            lines.append(line)
            in_visit = in_visit or "visit 1/" in line
            if in_visit and "decode: started pid" in line:
                armed.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 300
        while not armed.wait(0.05):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("no arm's co-restart seen:\n" + "".join(lines))
        time.sleep(delay)  # the point in the co-restart to cut, not a wait for a condition
        os.killpg(proc.pid, signal.SIGINT)
        for gap in gaps:
            time.sleep(gap)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(timeout=30)
    return proc.returncode, "".join(lines)


@pytest.mark.timeout(1500)
def test_ctrl_c_during_investigates_experiment_never_leaves_the_router_down_unnamed(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    failures = []
    for i, (delay, gaps) in enumerate(TRIES):
        ledger_file = tmp_path / f"ledger{i}.db"
        with Ledger.open(ledger_file) as ledger:
            cid = asyncio.run(_incident(stack, ledger))
        code, err = _interrupted(stack, ledger_file, cid, delay, gaps)
        down = [s for s in stack.spec.services if not answers(stack, s)]
        recovery = f"servelab up -f {stack.source}"
        named = f"down: {', '.join(down)}; bring them back with: {recovery}" in err
        print(f"delay {delay} then {gaps}: exit {code}, down {down}, named {named}\n{err[-600:]}")
        assert code == 130, err
        assert "Traceback" not in err, err
        if down and not named:
            failures.append((delay, gaps, down, err[-800:]))
        if down:
            assert run_cli("up", "-f", stack.source, timeout=300).returncode == 0
    assert failures == [], failures


def _router_killed(stack: LoadedSpec) -> None:
    """The router this module's stack runs, killed (its group, from its pid record) and seen not
    answering (bounded)."""
    record = json.loads((stack.state_dir / "run" / "router.json").read_text(encoding="utf-8"))
    os.killpg(int(record["pgid"]), signal.SIGKILL)
    deadline = time.monotonic() + 30
    while answers(stack, "router"):
        assert time.monotonic() < deadline, "the router still answers"
        time.sleep(0.05)


@pytest.mark.timeout(600)
def test_a_stop_where_no_put_back_runs_names_what_is_down_and_the_command(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    """Ctrl-C during the reproducing soak (nothing changed yet, so nothing to put back) with the
    router gone meanwhile: the command reads the services and names it down, with ``up``."""
    ledger_file = tmp_path / "ledger.db"
    with Ledger.open(ledger_file) as ledger:
        cid = asyncio.run(_incident(stack, ledger))
    argv = [sys.executable, "-m", "servelab", "investigate", "-f", stack.source, "--ledger",
            str(ledger_file), "--case", str(cid), "--symptom", "hang", "--yes", "--sessions", "4",
            "--rounds", "2", "--idle-timeout", "3", "--duration", "60"]  # fmt: skip
    try:
        with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True) as proc:  # fmt: skip
            assert proc.stderr is not None
            seen = []
            for raw in proc.stderr:  # up to the reproducing soak's start (after its model
                seen.append(raw.decode(errors="replace"))  # check through the router)
                if "soak: 4 sessions x 2 rounds" in seen[-1]:
                    break
            else:
                pytest.fail("no reproducing soak seen:\n" + "".join(seen))
            # held still while its router is killed, so it sees the stop before a failed
            # request (a busy machine let it fail a request through the dead router first)
            os.killpg(proc.pid, signal.SIGSTOP)
            try:
                _router_killed(stack)
                os.killpg(proc.pid, signal.SIGINT)
            finally:
                os.killpg(proc.pid, signal.SIGCONT)
            _out, rest = proc.communicate(timeout=300)
        err = " ".join(("".join(seen) + rest.decode(errors="replace")).split())
        assert proc.returncode == 130, err
        assert (f"stopped before the deployment was put back; down: router; bring them back "
                f"with: servelab up -f {stack.source}") in err, err  # fmt: skip
        assert " interrupted" in err and "Traceback" not in err, err
    finally:
        assert run_cli("up", "-f", stack.source, timeout=300).returncode == 0
    assert answers(stack, "router")
