"""``ab``, ``tune`` and ``case test`` stopped by a signal where no put-back runs name what is down
and the command that brings it back, as ``investigate`` does (issue 38), on a real simulated
stack: never "interrupted" alone with the router down.

Each command is held, deterministically, before anything changed (outside its put-back): the
decode is stopped (SIGSTOP), so the command's first request to it (its readiness probe, before
any arm) waits; once that connection is open (read from ``/proc``: the command's own socket to
the decode's port), the router is killed, the command gets SIGINT and the decode SIGCONT. The
command reads the services then: the router down, named with ``servelab up -f SPEC``, in text
and in ``--json``'s ``down``/``recovery`` (without the net: exit 130, nothing named).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.deploy.putback import KnobBack
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.context import Operation
from servelab.ops.deploy.putback import as_found, left_as_is, watching_put_backs
from servelab.ops.knob import get_knob, set_knob
from tests.support import free_ports, run_cli
from tests.support.deployed import deployed
from tests.support.processes import connected, default_stop_signals, held_still
from tests.support.putbacks import FOUND, TARGET, answers, suspect_case
from tests.support.putbacks import as_found as as_found_on_stack
from tests.support.specs import PdPorts, write_pd_spec

LOAD = ("--concurrency", "2", "--requests", "8", "--warmup", "1", "--output-len", "8",
        "--input-len", "32")  # fmt: skip
ARMS = ("--knob", f"decode:{DEFAULT_KNOB}=256,128")
_rng = random.Random(os.getpid())


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    root = tmp_path_factory.mktemp("namedown")
    ports = PdPorts(*free_ports(5, draw=lambda: _rng.randint(20000, 20999)))
    spec = write_pd_spec(root, ports=ports, time_scale=0.05, name="namedown", knob=FOUND)
    loaded = load_spec(spec)
    with deployed(loaded):
        yield loaded


def _pgid(stack: LoadedSpec, service: str) -> int:
    record = json.loads((stack.state_dir / "run" / f"{service}.json").read_text("utf-8"))
    return int(record["pgid"])


def _port(stack: LoadedSpec, service: str) -> int:
    port = urlsplit(stack.spec.services[service].url).port
    assert port is not None
    return port


def _router_killed(stack: LoadedSpec) -> None:
    os.killpg(_pgid(stack, "router"), signal.SIGKILL)
    deadline = time.monotonic() + 30
    while answers(stack, "router"):
        assert time.monotonic() < deadline, "the router still answers"
        time.sleep(0.02)


def _stopped_before_any_change(stack: LoadedSpec, argv: list[str]) -> tuple[int, str, str]:
    """``argv`` run with the decode held still; SIGINT once it waits on the decode and the router
    is gone; exit code, stdout, stderr as one line."""
    decode = _pgid(stack, "decode")
    held_still(decode)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=default_stop_signals)  # fmt: skip
    try:
        try:
            deadline = time.monotonic() + 120
            while not connected(proc.pid, _port(stack, "decode")):
                if proc.poll() is not None or time.monotonic() > deadline:
                    out, err = proc.communicate(timeout=60)
                    pytest.fail(f"no request to the decode seen: {out!r} {err!r}")
                time.sleep(0.01)
            _router_killed(stack)
            os.killpg(proc.pid, signal.SIGINT)
        finally:
            os.killpg(decode, signal.SIGCONT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return proc.returncode, out.decode(), " ".join(err.decode().split())


def _argv(stack: LoadedSpec, ledger: Path, command: str) -> list[str]:
    base = [sys.executable, "-m", "servelab"]
    where = ["-f", stack.source, "--ledger", str(ledger)]
    if command == "ab":
        return [*base, "ab", *where, *ARMS, "--repeat", "1", *LOAD, "--answers", "off"]
    if command == "tune":
        return [*base, "tune", *where, *ARMS, "--max-rounds", "3", *LOAD]
    cid = suspect_case(ledger)  # case test
    return [*base, "case", "test", *where, cid, TARGET, "--to", "128", "--test", "answers@C2",
            "--rounds", "1", "--runs", "1", "--requests", "8"]  # fmt: skip


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("command", "as_json"),
    [("ab", False), ("ab", True), ("tune", False), ("case test", True)],
    ids=["ab-text", "ab-json", "tune-text", "case-test-json"],
)
def test_a_stop_where_no_put_back_runs_names_the_router_down_and_the_command(
    stack: LoadedSpec, tmp_path: Path, command: str, as_json: bool
) -> None:
    argv = _argv(stack, tmp_path / "ledger.db", command) + (["--json"] if as_json else [])
    recovery = f"servelab up -f {stack.source}"
    try:
        code, out, err = _stopped_before_any_change(stack, argv)
        assert code == 130, err
        assert "Traceback" not in err, err
        assert (f"stopped before the deployment was put back; down: router; bring them back "
                f"with: {recovery}") in err, err  # fmt: skip
        assert answers(stack, "decode") and not answers(stack, "router")
        if as_json:
            doc = json.loads(out)
            assert doc["down"] == ["router"], doc
            assert doc["recovery"] == recovery, doc
            assert doc["report"]["down"] == ["router"], doc
    finally:
        assert run_cli("up", "-f", stack.source, timeout=300).returncode == 0
    assert answers(stack, "router")


def _held_at_an_arm(stack: LoadedSpec, proc: subprocess.Popen[bytes]) -> str:
    """Once the decode's knob file holds an arm's value, ``proc`` held still (SIGSTOP); the
    value."""
    deadline = time.monotonic() + 120
    while (value := asyncio.run(get_knob(stack, "decode", DEFAULT_KNOB))) == FOUND:
        if proc.poll() is not None or time.monotonic() > deadline:
            out, err = proc.communicate(timeout=60)
            pytest.fail(f"no arm's value written: {out!r} {err!r}")
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGSTOP)
    assert value is not None
    return value


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "signals",
    [(signal.SIGINT, signal.SIGTERM), (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)],
    ids=["second-taken-by-the-put-back", "third-stops-at-once"],
)
def test_a_second_signal_before_the_put_back_started_names_the_knob_left_at_an_arms_value(
    stack: LoadedSpec, tmp_path: Path, signals: tuple[signal.Signals, ...]
) -> None:
    """Signals at one instant (delivered together once the held ``ab`` goes on, lowest number
    first) after an arm's value was written: the first cancels the A/B, the second is given to
    the put-back before it starts, which then only reads what is left and says it; a third stops
    at once, and the stop net reads what the put-back never ran left (the 27th hostile pass:
    the file left at the arm's value, only the router named down, or "interrupted" alone)."""
    argv = [*_argv(stack, tmp_path / "ledger.db", "ab"), "--json"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=default_stop_signals)  # fmt: skip
    try:
        arm = _held_at_an_arm(stack, proc)
        for sig in signals:
            os.kill(proc.pid, sig)
        os.kill(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.communicate()
    said = " ".join(err.decode().split())
    try:
        assert proc.returncode == 128 + signals[0], said  # the first signal's, lowest first
        assert "Traceback" not in said, said
        assert asyncio.run(get_knob(stack, "decode", DEFAULT_KNOB)) == arm  # nothing put back
        fix = f"servelab knob set -f {stack.source} decode {DEFAULT_KNOB}={FOUND}"
        assert "the deployment is NOT as this command found it" in said, said
        assert (f"decode {DEFAULT_KNOB} is not back at {FOUND} in its file; put it back with: "
                f"{fix}") in said, said  # fmt: skip
        doc = json.loads(out)
        put = doc["put_back"]
        assert put["not_written"] == [{"service": "decode", "knob": DEFAULT_KNOB,
                                       "value": FOUND}], put  # fmt: skip
        assert put["fixes"] == [fix], put
        assert put["written"] == [] and put["interrupted"] is True, put
        recovery = doc["recovery"]  # a restart when the decode runs the arm's value, or is down
        if recovery is not None:
            assert recovery.startswith(f"servelab restart -f {stack.source}"), recovery
            assert recovery in said, said
        for line in [fix] + ([recovery] if recovery else []):  # what it says fixes it does
            words = shlex.split(line)
            assert run_cli(*words[1:], timeout=300).returncode == 0, line
        as_found_on_stack(stack)
    finally:
        assert run_cli("knob", "set", "-f", stack.source, "decode",
                       f"{DEFAULT_KNOB}={FOUND}").returncode == 0  # fmt: skip
        assert run_cli("restart", "-f", stack.source, "decode", timeout=300).returncode == 0


def test_a_put_back_block_a_stop_cut_is_left_listed_and_read_as_it_is(stack: LoadedSpec) -> None:
    """The stop net's other half, in process on the real stack: a block left by a
    ``KeyboardInterrupt`` (a signal raised inside the command's task) stays listed, an ended one
    does not; what the listed one left is read from the file and the process: the knob not back,
    with its ``knob set``, and no restart (the decode still runs the value found)."""
    knob = KnobBack("decode", DEFAULT_KNOB, FOUND)

    async def cut(stop: bool) -> None:
        async with Operation(stack) as op, as_found(op, [knob]):
            if stop:
                raise KeyboardInterrupt

    asyncio.run(set_knob(stack, "decode", DEFAULT_KNOB, "256", reason="test: an arm's value"))
    try:
        with watching_put_backs() as opened:
            asyncio.run(cut(stop=False))
            assert opened == []
            with pytest.raises(KeyboardInterrupt):
                asyncio.run(cut(stop=True))
            assert [entry.found for entry in opened] == [(knob,)]
            put = asyncio.run(left_as_is(list(opened)))
        assert put is not None and not put.ok
        assert put.not_written == (knob,) and put.written == ()
        assert put.fixes == (("servelab", "knob", "set", "-f", stack.source, "decode",
                              f"{DEFAULT_KNOB}={FOUND}"),)  # fmt: skip
        assert put.down == () and put.recovery == ()  # nothing to restart: it runs 512
        assert asyncio.run(left_as_is([])) is None
    finally:
        asyncio.run(set_knob(stack, "decode", DEFAULT_KNOB, FOUND, reason="test: put back"))
    as_found_on_stack(stack)
