"""``up`` run while the router servelab recorded is still stopping (issue 38, the twenty-seventh
pass): a command stopped by a signal names the router down with ``servelab up -f SPEC``, and that
``up``, run at once, found the old router alive, draining (smg answers 503 ``"draining"`` for
seconds after SIGTERM), waited for its readiness, saw it exit and failed ("the process exited
before it was ready"); a second ``up`` worked. Now the one ``up`` waits for it to be gone and
starts the router anew. Real processes: the simulated workers, the real smg router.

Held deterministically: the router gets SIGTERM; once it answers "draining" it is held still
(SIGSTOP) until ``up`` has a connection open to its port (its readiness gate, read from
``/proc``), then let go (SIGCONT): ``up`` meets it draining, every time.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import free_ports
from tests.support.generic import servelab_process, up_in
from tests.support.processes import alive, connected, held_still
from tests.support.specs import PdPorts, write_pd_spec

_rng = random.Random(os.getpid())
_BODY = json.dumps(
    {"model": "servelab-sim", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
).encode()


def _get(url: str, body: bytes | None = None) -> tuple[int | None, str]:
    """One request: its status and body (None: no answer)."""
    headers = {"Content-Type": "application/json"}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=10) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except OSError:
        return None, ""


def _record(root: Path, service: str) -> dict[str, int]:
    return json.loads((root / "state" / "run" / f"{service}.json").read_text("utf-8"))  # type: ignore[no-any-return]


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[Path, PdPorts]]:
    ports = PdPorts(*free_ports(5, draw=lambda: _rng.randint(20000, 20999)))
    write_pd_spec(tmp_path, ports=ports, time_scale=0.05, router_kind="smg")
    with up_in(tmp_path):
        yield tmp_path, ports


def _until_draining(router: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        status, body = _get(f"{router}/readiness")
        if status == 503 and "draining" in body:
            return
        assert time.monotonic() < deadline, (status, body)
        time.sleep(0.02)


@pytest.mark.timeout(300)
def test_up_at_once_after_the_router_was_stopped_waits_for_it_and_starts_it(
    stack: tuple[Path, PdPorts],
) -> None:
    root, ports = stack
    router = f"http://127.0.0.1:{ports.router}"
    old = _record(root, "router")
    os.killpg(old["pgid"], signal.SIGTERM)  # as a stopped command's cleanup left it: stopping
    _until_draining(router)
    held_still(old["pgid"])
    proc = servelab_process(root, "up")
    try:
        try:
            deadline = time.monotonic() + 120
            while not connected(proc.pid, ports.router):
                if proc.poll() is not None or time.monotonic() > deadline:
                    early = proc.communicate(timeout=60)
                    pytest.fail(f"up never probed the router: {early!r}")
                time.sleep(0.01)
        finally:
            os.killpg(old["pgid"], signal.SIGCONT)
        out_b, err_b = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    out, err = out_b.decode(), " ".join(err_b.decode().split())
    assert proc.returncode == 0, out + err
    assert "up: ok" in out, out
    assert f"router: pid {old['pid']} was stopping (it exited while up waited); starting it" in err
    new = _record(root, "router")
    assert new["pid"] != old["pid"] and not alive(old["pid"])
    status, body = _get(f"{router}/v1/chat/completions", _BODY)  # right after `up` said ok
    assert status == 200, body
