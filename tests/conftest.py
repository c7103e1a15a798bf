"""Fixtures shared by several test modules (helpers themselves live in ``tests/support``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.sshd import SshdServer, start_sshd

__all__ = ["sshd"]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshdServer]:
    """A real loopback sshd, one per test module that asks for it."""
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()
