"""A real OpenSSH server for the tests, on a free loopback port, in a temp directory.

``start_sshd(directory)`` generates a host key and a client key, authorizes the client key for the
current user (root login by key only, no passwords), starts ``/usr/sbin/sshd -D -f CONFIG -e`` and
waits until it accepts connections. ``SshdServer.stop()`` ends it. When ``/usr/sbin/sshd`` is
missing, tests that need it skip with a clear reason for a developer without root, and fail in CI
or as root (:func:`tests.support.sysdeps.missing`; ``bash scripts/sysdeps.sh`` installs it).

Nothing relies on ``PermitUserEnvironment``/``AcceptEnv``: servelab passes a service's environment
on the command line it runs, from the service's env file.

Tests get one per module through the ``sshd`` fixture of ``tests/conftest.py``;
``SshdServer.host_spec()`` is the :class:`~servelab.core.deploy.spec.HostSpec` that reaches it;
``SshdServer.logins()`` counts the connections it authenticated (from its own log, server side).
"""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncssh
import pytest

from servelab.core.deploy.spec import HostSpec
from tests.support import free_port
from tests.support.sysdeps import missing

__all__ = [
    "SSHD",
    "SshdServer",
    "configure_sshd",
    "require_sshd",
    "start_sshd",
    "wait_listening",
]

SSHD = Path("/usr/sbin/sshd")


@dataclass
class SshdServer:
    """A running sshd: where to reach it and which key to use."""

    port: int
    user: str
    identity_file: Path
    directory: Path
    process: subprocess.Popen[bytes]

    @property
    def ssh(self) -> str:
        return f"{self.user}@127.0.0.1"

    def host_spec(self) -> HostSpec:
        """The host model (user, port, key) that reaches this server."""
        return HostSpec(ssh=self.ssh, port=self.port, identity_file=str(self.identity_file))

    def host_toml(self, name: str = "remote") -> str:
        """The ``[hosts.NAME]`` table of a spec that reaches this server."""
        return (
            f'[hosts.{name}]\nssh = "{self.ssh}"\nport = {self.port}\n'
            f'identity_file = "{self.identity_file}"\nconnect_timeout_s = 10\n'
        )

    def log(self) -> str:
        return (self.directory / "sshd.log").read_text(errors="replace")

    def logins(self) -> int:
        """SSH connections this server has authenticated so far (its log's "Accepted" lines)."""
        return sum(1 for line in self.log().splitlines() if "Accepted publickey for" in line)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def require_sshd(sshd: Path = SSHD) -> None:
    """Skip (a developer without root) or fail (CI, root) when OpenSSH's server is missing."""
    if not sshd.exists():
        missing(f"{sshd} is missing (package openssh-server)")


def _write_key(path: Path) -> asyncssh.SSHKey:
    key = asyncssh.generate_private_key("ssh-ed25519")
    key.write_private_key(str(path))
    key.write_public_key(str(path) + ".pub")
    os.chmod(path, 0o600)
    return key


def _config(directory: Path, port: int, extra: Sequence[str] = ()) -> str:
    return "\n".join(
        [
            f"Port {port}",
            "ListenAddress 127.0.0.1",
            f"HostKey {directory / 'host_key'}",
            f"PidFile {directory / 'sshd.pid'}",
            f"AuthorizedKeysFile {directory / 'authorized_keys'}",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "AllowTcpForwarding yes",
            "MaxSessions 50",
            "MaxStartups 50",
            "LogLevel INFO",  # INFO logs each login ("Accepted publickey"): tests count them
            # bash run by sshd sources the login user's ~/.bashrc for every command unless it is a
            # nested shell (SHLVL already set): this machine's root runs `pyenv init` there, about
            # 120 ms of CPU and 50 processes per command (a test file sends hundreds). Nothing here
            # relies on a login rc file; servelab passes a service's environment on the command.
            "SetEnv SHLVL=1",
            *extra,
            "",
        ]
    )


def configure_sshd(directory: Path, extra_config: Sequence[str] = ()) -> tuple[int, Path]:
    """Write a host key, a client key (``client_key``, authorized) and ``sshd_config`` for a free
    loopback port into ``directory``; return the port and the config's path. The server logs to
    its stderr (``-e``): run it with stderr appended to ``directory / "sshd.log"``."""
    directory.mkdir(parents=True, exist_ok=True)
    _write_key(directory / "host_key")
    client = _write_key(directory / "client_key")
    (directory / "authorized_keys").write_bytes(client.export_public_key())
    port = free_port()
    config = directory / "sshd_config"
    config.write_text(_config(directory, port, extra_config))
    return port, config


def wait_listening(port: int, alive: Callable[[], bool], deadline: float) -> None:
    """Wait until 127.0.0.1:``port`` accepts connections; RuntimeError when ``alive()`` turns
    false or ``deadline`` (a ``time.monotonic()`` value) passes."""
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError("sshd exited at start-up")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"sshd did not listen on 127.0.0.1:{port} in time")


def start_sshd(
    directory: Path, *, timeout: float = 10.0, extra_config: Sequence[str] = ()
) -> SshdServer:
    """Start a real sshd on a free loopback port; :func:`require_sshd` first.

    ``extra_config``: more ``sshd_config`` lines (e.g. a ``ForceCommand`` that makes some
    sessions slow)."""
    require_sshd()
    port, config = configure_sshd(directory, extra_config)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation directory
    log = (directory / "sshd.log").open("ab")
    process = subprocess.Popen(
        [str(SSHD), "-D", "-f", str(config), "-e"], stdout=log, stderr=log, stdin=subprocess.DEVNULL
    )
    log.close()
    server = SshdServer(port, getpass.getuser(), directory / "client_key", directory, process)
    try:
        wait_listening(port, lambda: process.poll() is None, time.monotonic() + timeout)
    except RuntimeError as exc:
        server.stop()
        pytest.fail(f"{exc} (status {process.returncode}); log: {server.log()[-2000:]}")
    return server
