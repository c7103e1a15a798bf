"""Fixtures shared by several test modules (helpers themselves live in ``tests/support``)."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from collections.abc import Iterator

import pytest

from servelab.io.ledger.connection import LEDGER_ENV
from servelab.io.lock import LOCK_DIR_ENV
from tests.support.order import load_times, slowest_files_first
from tests.support.sshd import SshdServer, start_sshd

__all__ = ["no_outer_ledger", "pytest_collection_modifyitems", "sshd"]

# A suite started in the background of a shell without job control (`nohup make test &`, a CI
# runner's script) inherits SIGINT and SIGQUIT ignored, and so would every process it starts: the
# tests that press Ctrl-C on a command would wait on a command that cannot hear it. Handled here
# (in every worker), the signals reach the processes the tests start at their default.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGQUIT, signal.SIG_DFL)

# The endpoints' locks (servelab.io.lock) are machine-wide: each worker keeps its own, so a demo or
# another suite on this machine never meets this suite's locks, nor one worker another's (within a
# test, every servelab process it starts shares its worker's).
os.environ[LOCK_DIR_ENV] = tempfile.mkdtemp(prefix="servelab-locks-")

# Bytecode is cached for this run and every process it starts: with PYTHONDONTWRITEBYTECODE set in
# the outer environment, each of the suite's hundreds of Python processes (CLI runs, simulated
# workers, proxies) would compile servelab from source again (about 0.6 s of CPU each), and each
# pytest worker would rewrite every test module's asserts again at collection.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


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


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slowest test files first (tests/support/order.py): with ``--dist loadfile
    --no-loadscope-reorder`` a slow file no longer starts last and runs alone at the end."""
    files = {i: item.nodeid.split("::", 1)[0] for i, item in enumerate(items)}
    items[:] = slowest_files_first(items, files, load_times())
