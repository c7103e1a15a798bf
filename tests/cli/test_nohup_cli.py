"""A command started with SIGHUP ignored (``nohup servelab ...``, then the SSH session closes), or
SIGINT (a background job of a script), keeps it ignored while it runs: the hostile pass's
``nohup servelab restart`` ended by the hang-up ("restart interrupted; down: router", exit 129),
because the command's own handlers went in over the ignored disposition. Real processes:
``servelab up`` of the simulated workers behind the real sglang-router, the signal sent while it
starts them (its stderr has said the prefill started)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import free_ports
from tests.support.generic import downed_in
from tests.support.specs import PdPorts, write_pd_spec

_rng = random.Random(os.getpid())


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    ports = PdPorts(*free_ports(5, draw=lambda: _rng.randint(24000, 24999)))
    write_pd_spec(tmp_path, ports=ports, time_scale=0.05)
    with downed_in(tmp_path):
        yield tmp_path


def _ignores(pid: int, signum: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text("ascii").splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signum - 1)))
    raise AssertionError(f"no SigIgn line for {pid}")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGINT], ids=["nohup", "background"])
def test_a_command_started_with_a_stop_signal_ignored_keeps_it_ignored(
    root: Path, signum: int
) -> None:
    """``nohup`` ignores SIGHUP; a shell without job control starts a background job (``cmd &``
    in a script) with SIGINT ignored (the thirty-second pass: ``bench`` and ``restart`` so
    started still stopped on SIGINT)."""
    env = {**os.environ, "SERVELAB_LEDGER": str(root / "ledger.db")}
    proc = subprocess.Popen([sys.executable, "-m", "servelab", "up"], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signum, signal.SIG_IGN))  # fmt: skip
    try:
        assert proc.stderr is not None
        seen = []
        for raw in proc.stderr:  # bounded: the command's own lines, then its end
            seen.append(raw.decode())
            if raw.startswith(b"prefill: started"):
                break
        assert seen and seen[-1].startswith("prefill: started"), seen
        assert _ignores(proc.pid, signum), f"the running command handles {signum}"
        os.kill(proc.pid, signum)
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    text = "".join(seen) + err.decode()
    assert proc.returncode == 0, text
    assert "router: ok" in text and "interrupted" not in text, text
    assert "up: ok" in out.decode(), out.decode()
