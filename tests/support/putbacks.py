"""The set-ups the put-back tests share (a command that changes a knob, stopped by a signal or
failing, must leave the deployment as it found it): a simulated PD stack with the decode knob at
a value, servelab as a process on it, its end, and the checks that the deployment is as found.
Real processes, real signals; waits on conditions, bounded."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.case import case as cases
from servelab.ops.knob import get_knob, live_knob
from tests.support.deployed import deployed
from tests.support.processes import default_stop_signals
from tests.support.specs import write_pd_spec

__all__ = ["FOUND", "TARGET", "answers", "as_found", "ended", "pd_stack", "start", "suspect_case"]

#: The decode knob's value as every test finds it.
FOUND = "512"
#: The decode knob as a case's suspect.
TARGET = f"knob:decode/{DEFAULT_KNOB}"


def pd_stack(
    factory: pytest.TempPathFactory, name: str, knobs: tuple[str, ...] = (DEFAULT_KNOB,)
) -> Iterator[LoadedSpec]:
    """A module's stack (use in a fixture): the decode's knob at :data:`FOUND`, ``knobs`` the
    spec's declared knobs, up until the module ends."""
    root = factory.mktemp(name)
    spec = write_pd_spec(root, time_scale=0.05, name=name, knob=FOUND, knobs=knobs)
    loaded = load_spec(spec)
    with deployed(loaded):
        yield loaded


def answers(loaded: LoadedSpec, service: str) -> bool:
    """``service``'s ``/health`` answers 200."""
    url = loaded.spec.services[service].url.rstrip("/")
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def as_found(loaded: LoadedSpec) -> None:
    """The knob at its value in the file and in the process, every service answering."""
    assert asyncio.run(get_knob(loaded, "decode", DEFAULT_KNOB)) == FOUND
    assert asyncio.run(live_knob(loaded, "decode", DEFAULT_KNOB)) == FOUND
    assert [s for s in loaded.spec.services if not answers(loaded, s)] == []


def suspect_case(ledger_file: Path) -> str:
    """A case with the decode knob as its suspect; its id."""
    with Ledger.open(ledger_file) as ledger:
        cid = cases.open_case(ledger, "sessions hang")
        cases.add_suspect(ledger, cid, TARGET, "the latest change")
    return str(cid)


def start(loaded: LoadedSpec, ledger_file: Path, *args: str) -> subprocess.Popen[bytes]:
    """``servelab ARGS -f SPEC --ledger LEDGER`` as a process, its output piped."""
    argv = [sys.executable, "-m", "servelab", *args, "-f", loaded.source, "--ledger",
            str(ledger_file)]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ,
                            preexec_fn=default_stop_signals)  # fmt: skip


def ended(proc: subprocess.Popen[bytes]) -> tuple[int, str, str]:
    """Wait (at most 240 s, then kill) for ``proc``: its exit code, stdout, stderr as one line."""
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out.decode(), " ".join(err.decode().split())
