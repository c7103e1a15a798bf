"""Finding the process serving a service and reading named live variables, locally and over SSH."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.io.hosts import discovery
from servelab.io.hosts.discovery import find_process, read_live, unit_main_pid
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
