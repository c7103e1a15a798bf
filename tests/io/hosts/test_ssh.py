"""SSH specifics against a real loopback sshd: one reused connection, failures translated."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncssh
import pytest

from servelab.core.deploy.spec import HostSpec
from servelab.errors import HostError, SSHError
from servelab.io.hosts import ssh as ssh_module
from servelab.io.hosts.host import host_for
from servelab.io.hosts.ssh import SSHHost
from tests.support import free_port
from tests.support.sshd import SshdServer


async def test_ssh_connection_reused(sshd: SshdServer) -> None:
    remote = SSHHost("remote", sshd.host_spec())
    try:
        results = await asyncio.gather(*(remote.run("echo $$", timeout=10) for _ in range(5)))
        assert len({r.stdout for r in results}) == 5
        assert remote._conn is not None
    finally:
        await remote.aclose()


async def test_an_empty_file_is_written_over_ssh(sshd: SshdServer, tmp_path: Path) -> None:
    """asyncssh sends no end of file for empty input: the write's ``cat`` waited until its
    timeout (a launch copy of an empty env file, the router's, hung ``up`` over SSH)."""
    remote = SSHHost("remote", sshd.host_spec())
    try:
        target = tmp_path / "router.env"
        target.write_bytes(b"OLD=1\n")
        await asyncio.wait_for(remote.write_file_atomic(str(target), b"", backup=False), 20)
        assert target.read_bytes() == b""
    finally:
        await remote.aclose()


async def test_ssh_connect_failure_is_ssh_error(tmp_path: Path) -> None:
    spec = HostSpec(ssh="root@127.0.0.1", port=free_port(), connect_timeout_s=2)
    remote = host_for("nowhere", spec)
    with pytest.raises(SSHError) as info:
        await remote.run("true", timeout=5)
    assert "nowhere" in str(info.value) and isinstance(info.value, ConnectionError)


async def test_a_host_that_never_answers_is_named_as_a_timeout() -> None:
    """A port that accepts and stays silent (no SSH banner): the message says it timed out,
    not ``TimeoutError: TimeoutError``."""
    accepted: list[asyncio.StreamWriter] = []
    silent = await asyncio.start_server(lambda _r, w: accepted.append(w), "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    try:
        spec = HostSpec(ssh="root@127.0.0.1", port=port, connect_timeout_s=0.5)
        with pytest.raises(SSHError) as info:
            await host_for("mute", spec).run("true", timeout=5)
    finally:
        for writer in accepted:
            writer.close()
        silent.close()
        await silent.wait_closed()
    assert str(info.value) == (
        f"mute: cannot connect to root@127.0.0.1 port {port}: no answer (timed out)"
    )


async def test_ssh_wrong_key_is_ssh_error(sshd: SshdServer, tmp_path: Path) -> None:
    key = asyncssh.generate_private_key("ssh-ed25519")
    key.write_private_key(str(tmp_path / "other"))
    spec = HostSpec(ssh=sshd.ssh, port=sshd.port, identity_file=str(tmp_path / "other"))
    remote = host_for("remote", spec)
    with pytest.raises(SSHError):
        await remote.run("true", timeout=5)


async def test_remote_env_is_passed_on_the_command_line(sshd: SshdServer) -> None:
    remote = SSHHost("remote", sshd.host_spec())
    try:
        result = await remote.run("env -- KNOB='a b' sh -c 'echo \"$KNOB\"'", timeout=10)
        assert result.stdout == "a b\n"
        with pytest.raises(HostError):
            await remote.read_file("/nonexistent/file")
    finally:
        await remote.aclose()


async def test_aclose_is_idempotent_and_reconnects(sshd: SshdServer) -> None:
    remote = SSHHost("remote", sshd.host_spec())
    assert (await remote.run("true", timeout=10)).ok
    await remote.aclose()
    await remote.aclose()
    assert (await remote.run("echo again", timeout=10)).stdout == "again\n"
    await remote.aclose()


def test_public_api() -> None:
    assert ssh_module.__all__ == ["SSHHost"]
