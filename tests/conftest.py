"""Fixtures shared by several test modules (helpers themselves live in ``tests/support``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from servelab.io.ledger.ledger import LEDGER_ENV
from tests.support.sshd import SshdServer, start_sshd

__all__ = ["no_outer_ledger", "sshd"]


@pytest.fixture(autouse=True)
def no_outer_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hermetic tests: a ``SERVELAB_LEDGER`` of the outer environment never reaches a test (nor
    the CLI processes it starts, which inherit ``os.environ``). A test that wants one sets it."""
    monkeypatch.delenv(LEDGER_ENV, raising=False)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshdServer]:
    """A real loopback sshd, one per test module that asks for it."""
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()
