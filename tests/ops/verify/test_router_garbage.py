"""A router whose ``GET /workers`` answers 200 with garbage (issue 38, eighth hostile pass): a
real process (``tests/support/hostile_router.py``) on a free loopback port as the spec's router.
A list of another shape was read as no workers (every worker "missing", the wrong cause); it is
``health.workers_unreadable``, naming the URL and what was wrong. Control characters in what it
lists (an ``ESC`` sequence, a ``NUL``) were kept verbatim in the check (so in the ledger) and in
its sentence; they are escaped."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from servelab.core.ledger.codec import encode
from servelab.core.verify.checks import CheckCode
from servelab.core.verify.health import HealthProbe
from servelab.io.specfile import load_spec
from servelab.ops.verify.verify import verify
from servelab.report.verify import check_detail
from tests.support import REPO
from tests.support.processes import wait_answering
from tests.support.specs import PdPorts, pd_spec_toml


@contextmanager
def _router(mode: str, ports: PdPorts) -> Iterator[str]:
    argv = [sys.executable, "-m", "tests.support.hostile_router", str(ports.router), mode]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{ports.router}"
    try:
        wait_answering(url + "/v1/models", proc, 60)
        yield url
    finally:
        proc.kill()
        proc.wait(10)


def _spec(tmp_path: Path, ports: PdPorts) -> Path:
    path = tmp_path / "servelab.toml"
    path.write_text(pd_spec_toml(ports, env_dir=None, knobs=(), router_kind="smg"))
    return path


@pytest.mark.timeout(120)
async def test_a_worker_list_of_another_shape_fails_the_routers_check(tmp_path: Path) -> None:
    ports = PdPorts.free(proxy=False)
    with _router("garbage", ports) as url:
        report = await verify(load_spec(_spec(tmp_path, ports)), ["router"], layers=("health",))
    (check,) = report.checks
    assert check.code is CheckCode.HEALTH_WORKERS_UNREADABLE and not check.ok
    said = check_detail(check)
    assert f"GET {url}/workers: not a worker list" in said, said
    assert '"workers" is a string, not a list' in said


@pytest.mark.timeout(120)
async def test_control_characters_a_router_lists_are_stored_and_said_escaped(
    tmp_path: Path,
) -> None:
    ports = PdPorts.free(proxy=False)
    with _router("escapes", ports):
        report = await verify(load_spec(_spec(tmp_path, ports)), ["router"], layers=("health",))
    (check,) = report.checks
    assert isinstance(check.data, HealthProbe) and not check.ok
    stored = json.dumps(encode(check), ensure_ascii=False)
    said = check_detail(check)
    for raw in ("\x1b", "\x00", "\x07"):
        assert raw not in stored and raw not in said, (stored, said)
    (stale,) = check.data.unknown or ()
    assert stale.url.startswith("http://127.0.0.1:9\\x1b[2J") and "\\x00" in stale.id, stale
