"""Finding the process serving a service and reading named live variables, locally and over SSH."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.engines import SGLANG
from servelab.core.knob import parse_knob
from servelab.core.knobs.places import LiveSource, LiveValue
from servelab.io.hosts import discovery
from servelab.io.hosts.discovery import find_process, read_live, read_live_args, unit_main_pid
from servelab.io.hosts.host import Host
from servelab.io.specfile import load_spec
from tests.support.processes import http_server
from tests.support.specs import SECRET, write_decode_spec

KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    with http_server({KNOB: "512", "SECRET_TOKEN": SECRET}, cwd=tmp_path) as running:
        yield running


async def test_the_port_owner_is_found_and_only_named_variables_are_read(
    host: Host, tmp_path: Path, server: tuple[int, subprocess.Popen[bytes]]
) -> None:
    port, proc = server
    loaded = load_spec(write_decode_spec(tmp_path, port, role="generic", start="true"))
    found = await find_process(loaded, "decode", host)
    assert (found.pid, found.source) == (proc.pid, f"owner of port {port}")
    assert await read_live(host, proc.pid, [KNOB, "MISSING"]) == {KNOB: "512"}
    assert await unit_main_pid(host, "servelab-no-such-unit.service") is None


def test_public_api() -> None:
    for name in discovery.__all__:
        assert hasattr(discovery, name)


async def test_live_arguments_are_read_as_the_engine_parses_them_and_only_those(
    host: Host, tmp_path: Path
) -> None:
    """The command line wins over its ``--config`` file (read through ``/proc/PID/cwd``, as the
    path is relative); a value of another word (an API key) never leaves the function."""
    (tmp_path / "decode.yaml").write_text(
        "disable-overlap-schedule: true\nchunked-prefill-size: 4096\nmax-running-requests: 8\n"
    )
    args = ["--max-running-requests", "32", "--config", "decode.yaml",
            "--max-running-requests=64", "--api-key", SECRET]  # fmt: skip
    argv = [sys.executable, "-c", "import time; time.sleep(60)", *args]
    proc = subprocess.Popen(argv, cwd=tmp_path)
    try:
        await _until_exec(proc.pid, "--api-key")
        names = ("--max-running-requests", "--disable-overlap-schedule",
                 "--chunked-prefill-size", "--schedule-policy")  # fmt: skip
        knobs = [parse_knob(name) for name in names]
        live = await read_live_args(host, proc.pid, knobs, SGLANG)
    finally:
        proc.kill()
        proc.wait(5)
    assert live == {
        "--max-running-requests": LiveValue("64", LiveSource.CMDLINE),
        "--disable-overlap-schedule": LiveValue("on", LiveSource.CONFIG),
        "--chunked-prefill-size": LiveValue("4096", LiveSource.CONFIG),
        "--schedule-policy": LiveValue(None, LiveSource.DEFAULT),
    }
    assert SECRET not in repr(live)


async def _until_exec(pid: int, marker: str) -> None:
    """Until the child has exec'd (before that its cmdline is the parent's), at most 10 s."""
    for _ in range(1000):
        if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"pid {pid} never exec'd")
