"""``servelab up`` stopped by two signals (the twenty-ninth pass, issue 38): the first cancels
the start and its cleanup stops what this run started, router first; a second signal during that
cleanup stopped it at once, and it said only what it began to stop and "interrupted", prefill and
decode left running. Now what still runs is read and named, with the commands that stop it or
bring the rest up, in text and in ``--json``. Real processes: the simulated workers, the real
sglang-router 0.3.2.

Held deterministically: once the router started, it is held still (SIGSTOP), so the cleanup's
stop of it waits; the test sends SIGINT, waits until the router has the cleanup's SIGTERM pending
(``/proc/PID/status``), then sends SIGTERM: the second signal lands while the cleanup waits.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.io.specfile import load_spec
from tests.support import free_ports
from tests.support.generic import downed_in, servelab_process, text_or_empty
from tests.support.processes import held_still
from tests.support.putbacks import answers
from tests.support.specs import PdPorts, write_pd_spec

_rng = random.Random(os.getpid())


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    ports = PdPorts(*free_ports(5, draw=lambda: _rng.randint(20000, 20999)))
    write_pd_spec(tmp_path, ports=ports, time_scale=0.05)
    with downed_in(tmp_path):
        yield tmp_path


def _pgid(root: Path, service: str) -> int | None:
    text = text_or_empty(root / "state" / "run" / f"{service}.json")
    with contextlib.suppress(ValueError, KeyError, TypeError):
        return int(json.loads(text)["pgid"])
    return None


def _term_pending(pid: int) -> bool:
    """Process ``pid`` (held still) has a SIGTERM pending: the cleanup began to stop it."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text("ascii").splitlines():
            if line.startswith(("ShdPnd:", "SigPnd:")) and int(line.split()[1], 16) & (
                1 << (signal.SIGTERM - 1)
            ):
                return True
    return False


@pytest.mark.timeout(300)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_up_stopped_by_a_second_signal_in_its_cleanup_names_what_still_runs(
    root: Path, as_json: bool
) -> None:
    proc = servelab_process(root, "up", *(["--json"] if as_json else []))
    router = None
    try:
        deadline = time.monotonic() + 120
        while (router := _pgid(root, "router")) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no router started: {proc.communicate(timeout=60)!r}")
            time.sleep(0.005)
        held_still(router)  # its stop by the cleanup waits
        os.kill(proc.pid, signal.SIGINT)
        pid = int(json.loads(text_or_empty(root / "state" / "run" / "router.json"))["pid"])
        while not _term_pending(pid):  # the cleanup is stopping the router, and waits
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the router was not stopped: {proc.communicate(timeout=60)!r}")
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGTERM)
        out_b, err_b = proc.communicate(timeout=120)
    finally:
        if router is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(router, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    err = " ".join(err_b.decode().split())
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    loaded = load_spec(root / "servelab.toml")
    running = [s for s in ("prefill", "decode") if answers(loaded, s)]
    assert running, f"the cut left nothing running: this test no longer cuts the cleanup: {err}"
    stop = f"servelab down -f {root / 'servelab.toml'}"
    assert f"up interrupted; still running: {', '.join(running)}; stop them with: {stop}" in err
    if as_json:
        assert json.loads(out_b)["running"] == running, out_b
