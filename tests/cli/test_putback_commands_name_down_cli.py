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

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.io.specfile import LoadedSpec, load_spec
from tests.support import free_ports, run_cli
from tests.support.deployed import deployed
from tests.support.putbacks import FOUND, TARGET, answers, suspect_case
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


def _connected(pid: int, port: int) -> bool:
    """Process ``pid`` holds an open TCP connection to ``port`` (its sockets' inodes found in
    ``/proc/PID/net/tcp``'s rows whose remote port is ``port``)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with_link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if with_link.startswith("socket:["):
                inodes.add(with_link[8:-1])
        rows = Path(f"/proc/{pid}/net/tcp").read_text("ascii").splitlines()[1:]
    except OSError:  # ended, or an fd closed while read
        return False
    for row in rows:
        fields = row.split()
        remote, state, inode = fields[2], fields[3], fields[9]
        if int(remote.rsplit(":", 1)[1], 16) == port and state == "01" and inode in inodes:
            return True  # ESTABLISHED, one of its own
    return False


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
    os.killpg(decode, signal.SIGSTOP)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    try:
        try:
            deadline = time.monotonic() + 120
            while not _connected(proc.pid, _port(stack, "decode")):
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
