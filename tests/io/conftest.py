"""The ``host`` fixture: every host test runs locally and over a real loopback sshd."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from servelab.core.deploy.spec import HostSpec
from servelab.io.hosts.host import Host, host_for
from tests.support.sshd import SshdServer

__all__ = ["host"]


@pytest.fixture(params=["local", "ssh"])
async def host(request: pytest.FixtureRequest) -> AsyncIterator[Host]:
    if request.param == "local":
        yield host_for("local", HostSpec())
        return
    server: SshdServer = request.getfixturevalue("sshd")
    remote = host_for("remote", server.host_spec())
    yield remote
    await remote.aclose()
