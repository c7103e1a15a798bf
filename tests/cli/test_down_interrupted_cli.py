"""An interrupted ``servelab down -f SPEC`` names what it stopped, what still runs and the command
that finishes it (the thirtieth pass: "interrupted" alone, nothing named). Real processes: the
simulated workers behind the real router.

Held deterministically: the decode is held still (SIGSTOP on its process group), so ``down``'s
SIGTERM to it stays pending and ``down`` waits for it to exit (its grace 120 s); once the router
is gone and the decode's SIGTERM is seen pending (``/proc``), ``down`` gets SIGINT. It then reads
the pid records and processes: the router stopped, the decode still running.
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

import pytest

from tests.support import free_ports
from tests.support.generic import servelab_in, up_in
from tests.support.processes import held_still
from tests.support.specs import PdPorts, write_pd_spec

_rng = random.Random(os.getpid())


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Path]:
    ports = PdPorts(*free_ports(5, draw=lambda: _rng.randint(20000, 20999)))
    write_pd_spec(tmp_path, ports=ports, time_scale=0.05, decode_toml="stop_grace_s = 120\n")
    with up_in(tmp_path):
        yield tmp_path


def _record(root: Path, service: str) -> dict[str, int]:
    data = json.loads((root / "state" / "run" / f"{service}.json").read_text("utf-8"))
    return {"pid": int(data["pid"]), "pgid": int(data["pgid"])}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _term_pending(pid: int) -> bool:
    """Process ``pid`` has a SIGTERM pending (``/proc/PID/status``, its shared pending set)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return False
    pending = next((line.split()[1] for line in lines if line.startswith("ShdPnd:")), "0")
    return bool(int(pending, 16) & (1 << (signal.SIGTERM - 1)))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_an_interrupted_down_names_what_it_stopped_and_what_still_runs(
    stack: Path, as_json: bool
) -> None:
    root, spec = stack, stack / "servelab.toml"
    router, decode = _record(root, "router"), _record(root, "decode")
    env = {**os.environ, "SERVELAB_LEDGER": str(root / "ledger.db")}
    argv = [sys.executable, "-m", "servelab", "down", "-f", str(spec)]
    held_still(decode["pgid"])
    try:
        proc = subprocess.Popen([*argv, *(["--json"] if as_json else [])], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while _alive(router["pid"]) or not _term_pending(decode["pid"]):
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"no wait on the decode seen: {proc.communicate(timeout=60)!r}")
                time.sleep(0.005)
            os.kill(proc.pid, signal.SIGINT)
            out_b, err_b = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    finally:
        os.killpg(decode["pgid"], signal.SIGCONT)  # its SIGTERM, pending, then ends it
    out, err = out_b.decode(), " ".join(err_b.decode().split())
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    finish = f"servelab down -f {spec}"
    assert "down interrupted; stopped: router" in err, err
    assert "still running: " in err and "decode" in err.partition("still running: ")[2], err
    assert f"finish with: {finish}" in err, err
    if as_json:
        left = json.loads(out)["left"]
        assert "router" in left["stopped"] and "decode" in left["running"], left
        assert left["finish"] == finish, left
    code, _, said = servelab_in(root, "down")  # what it says finishes it does
    assert code == 0, said
    assert not _alive(decode["pid"]) and not _alive(router["pid"])
