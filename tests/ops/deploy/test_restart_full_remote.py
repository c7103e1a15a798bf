"""The write pre-flight's free-space check on an SSH host (issue 38, the tenth pass): a service's
log directory on its host on a full disk (a real tmpfs, filled) is refused before anything
stops, naming the host, the directory and the KiB free (``df -Pk`` there). Real sshd; root."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.errors import HostError
from servelab.io.hosts.processes import read_pid_record
from servelab.ops.deploy import deploy
from tests.cli.test_full_state_cli import fill, tmpfs
from tests.ops.deploy.test_deploy import _generic, _load
from tests.support import free_ports
from tests.support.sshd import SshdServer


async def test_a_full_remote_log_disk_is_refused_and_nothing_stops(
    tmp_path: Path, sshd: SshdServer
) -> None:
    (port,) = free_ports(1)
    remote = tmp_path / "remote-state"
    remote.mkdir()
    text = f'name = "t"\nstate_dir = "{remote}"\n' + sshd.host_toml("remote")
    loaded = _load(tmp_path, text + _generic("web", port, host="remote"))
    with tmpfs(remote / "logs") as logs:
        try:
            await deploy.up(loaded)
            before = read_pid_record(loaded.state_dir, "web")
            assert before is not None
            fill(logs)
            with pytest.raises(HostError) as caught:
                await deploy.restart(loaded, verify_after=False)
            said = str(caught.value)
            assert f"remote: cannot write {logs} (web's log): its disk is full: " in said, said
            assert "under 64 KiB" in said and "nothing was started or stopped" in said
            assert read_pid_record(loaded.state_dir, "web") == before  # not stopped
        finally:
            (logs / "filler").unlink(missing_ok=True)
            await deploy.down(loaded)
