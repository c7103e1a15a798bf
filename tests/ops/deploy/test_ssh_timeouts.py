"""The reference incident's event, over a real sshd: a restart whose command times out while the
service comes up fine is "command timed out; service healthy", whichever timeout it hit (the
start command outliving ``start_timeout_s``, or the SSH launch command itself)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.outcomes import StepOutcome
from servelab.core.ledger.codec import encode
from servelab.io.hosts.processes import read_pid_record
from servelab.io.specfile import LoadedSpec
from servelab.ops.deploy import deploy
from servelab.report.deploy import render_restart
from tests.ops.deploy.test_deploy import _generic, _load, _no_listeners
from tests.support import free_ports
from tests.support.progress import lines
from tests.support.sshd import SshdServer, start_sshd

PY = sys.executable

# Runs every command as asked; a servelab launch then keeps its SSH session open for longer than
# the launch's timeout (a host whose session would not close), while the service comes up. A launch
# is the one command servelab runs as ``sh -s`` (io.hosts.processes.LAUNCHER: the script on stdin).
LINGER = """#!/bin/sh
sh -c "$SSH_ORIGINAL_COMMAND"
status=$?
case "$SSH_ORIGINAL_COMMAND" in "sh -s") sleep 40 ;; esac
exit $status
"""


@pytest.fixture
def lingering_sshd(tmp_path: Path) -> Iterator[SshdServer]:
    script = tmp_path / "linger.sh"
    script.write_text(LINGER)
    script.chmod(0o755)
    server = start_sshd(tmp_path / "sshd", extra_config=[f"ForceCommand {script}"])
    yield server
    server.stop()


def _remote(tmp_path: Path, server: SshdServer, port: int, **extra: object) -> LoadedSpec:
    text = (
        f'name = "t"\nstate_dir = "{tmp_path}/remote-state"\n'
        + server.host_toml("remote")
        + _generic("web", port, host="remote", **extra)
    )
    return _load(tmp_path, text)


async def test_start_command_outliving_its_timeout_over_ssh(
    tmp_path: Path, sshd: SshdServer
) -> None:
    (port,) = free_ports(1)
    start = f'sh -c "sleep 2.5; {PY} -m http.server {port} --bind 127.0.0.1 & sleep 30"'
    loaded = _remote(tmp_path, sshd, port, start=start, start_timeout_s=1.5)
    try:
        restarted = await deploy.restart(loaded, verify_after=False)
        step = restarted.steps[0]
        assert step.outcome == StepOutcome.TIMED_OUT_HEALTHY and restarted.ok
        assert encode(step)["evidence"]["command_timeout_s"] == 1.5
        assert encode(step)["evidence"]["readiness"]["status"] == 200
    finally:
        await deploy.down(loaded)
    assert _no_listeners([port])


async def test_ssh_launch_timing_out_is_judged_by_readiness(
    tmp_path: Path, lingering_sshd: SshdServer
) -> None:
    (port,) = free_ports(1)
    loaded = _remote(tmp_path, lingering_sshd, port, start_timeout_s=5.0)
    messages: list[str] = []
    try:
        restarted = await deploy.restart(loaded, verify_after=False, progress=lines(messages))
        step = restarted.steps[0]
        assert step.outcome == StepOutcome.TIMED_OUT_HEALTHY and step.ok and restarted.ok
        assert encode(step)["evidence"]["launch_timed_out"] is True
        assert encode(step)["evidence"]["readiness"]["status"] == 200
        assert any("launch command timed out" in m for m in messages)
        assert "launch command timed out; readiness HTTP 200" in render_restart(restarted)
        record = read_pid_record(loaded.state_dir, "web")
        assert record is not None and record.pid == step.pid
        assert f"http.server {port}" in Path(f"/proc/{record.pid}/cmdline").read_text().replace(
            "\0", " "
        )
    finally:
        stopped = await deploy.down(loaded)
    assert [s.outcome for s in stopped.steps] == ["stopped"]
    assert _no_listeners([port])
