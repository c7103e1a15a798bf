"""The write pre-flight of ``restart`` over a real sshd (issue 38, the ninth pass): a service's
log on its SSH host that cannot be written (``chattr +i``) is named with its host, and nothing
is stopped; its places are listed for a spec (pid records and ledger here, log, status and
backups there)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from servelab.errors import HostError
from servelab.io.hosts.processes import read_pid_record
from servelab.ops.context import Operation
from servelab.ops.deploy import deploy
from servelab.ops.deploy.writable import places
from tests.ops.deploy.test_deploy import _generic, _load
from tests.support import free_ports
from tests.support.sshd import SshdServer


def _chattr(flag: str, path: Path) -> bool:
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


async def test_an_unwritable_remote_log_is_refused_and_nothing_stops(
    tmp_path: Path, sshd: SshdServer
) -> None:
    (port,) = free_ports(1)
    remote = tmp_path / "remote-state"
    text = f'name = "t"\nstate_dir = "{remote}"\n' + sshd.host_toml("remote")
    loaded = _load(tmp_path, text + _generic("web", port, host="remote"))
    log = remote / "logs" / "web.log"
    try:
        await deploy.up(loaded)
        before = read_pid_record(loaded.state_dir, "web")
        if not _chattr("+i", log):
            pytest.skip("chattr +i is not available here")
        with pytest.raises(HostError) as caught:
            await deploy.restart(loaded, verify_after=False)
        assert f"remote: cannot write {log} (web's log)" in str(caught.value)
        assert "nothing was started or stopped" in str(caught.value)
        assert read_pid_record(loaded.state_dir, "web") == before  # not stopped
    finally:
        _chattr("-i", log)
        await deploy.down(loaded)


async def test_the_places_a_restart_writes(tmp_path: Path, sshd: SshdServer) -> None:
    (port,) = free_ports(1)
    remote = tmp_path / "remote-state"
    text = f'name = "t"\nstate_dir = "{remote}"\n' + sshd.host_toml("remote")
    loaded = _load(tmp_path, text + _generic("web", port, host="remote"))
    async with Operation(loaded) as op:
        plain = {(p.service, p.path, p.directory) for p in places(op, ["web"], rollback=False)}
        rolled = {p.path for p in places(op, ["web"], rollback=True)}
    run = loaded.state_dir / "run"
    assert plain == {
        (None, str(run), True),
        (None, str(run / "web.json"), False),
        ("web", f"{remote}/logs", True),
        ("web", f"{remote}/logs/web.log", False),
        ("web", f"{remote}/run", True),
    }
    assert f"{remote}/backups/web" in rolled  # a rollback copies the files aside first
