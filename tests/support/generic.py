"""Deployments of ``role = "generic"`` services (a plain ``python -m http.server`` each) for the
CLI tests of deploy, lock and signal handling, and a ``servelab`` command run as a real process
beside them."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.support import run_cli
from tests.support.processes import default_stop_signals, live_procs_under

__all__ = [
    "HTTP_SERVER", "downed_in", "generic_service", "servelab_in", "servelab_process",
    "text_or_empty", "up_in",
]  # fmt: skip

#: A service's start command: a real HTTP server on ``{port}``, exec'd so its pid is the service's.
HTTP_SERVER = f"exec {sys.executable} -m http.server {{port}} --bind 127.0.0.1"


def generic_service(name: str, port: int, extra: str = "") -> str:
    """The spec table of generic service ``name`` serving on ``port``, plus ``extra`` keys."""
    return (
        f'[services.{name}]\nrole = "generic"\nurl = "http://127.0.0.1:{port}"\n'
        f"start = '{HTTP_SERVER.format(port=port)}'\n{extra}"
    )


def servelab_in(root: Path, *args: str) -> tuple[int, str, str]:
    """``servelab ARGS`` run in ``root`` with its ledger there: exit code, stdout, stderr."""
    done = run_cli(*args, cwd=root, env={"SERVELAB_LEDGER": str(root / "ledger.db")})
    return done.returncode, done.stdout, done.stderr


def servelab_process(root: Path, *args: str) -> subprocess.Popen[bytes]:
    """``servelab ARGS`` started in ``root`` with its ledger there, its output piped (to signal
    it, or race another command against it)."""
    env = {**os.environ, "SERVELAB_LEDGER": str(root / "ledger.db")}
    return subprocess.Popen(
        [sys.executable, "-m", "servelab", *args],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=default_stop_signals,
    )  # fmt: skip


def text_or_empty(path: Path) -> str:
    """The file's text, or "" while it does not exist (a pid record not yet written)."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


@contextlib.contextmanager
def up_in(root: Path) -> Iterator[Path]:
    """``servelab up`` in ``root`` (its ``servelab.toml``), ``root`` while it runs, then ``servelab
    down`` and no process left under ``root``."""
    code, _, err = servelab_in(root, "up")
    assert code == 0, err
    with downed_in(root):
        yield root


@contextlib.contextmanager
def downed_in(root: Path) -> Iterator[Path]:
    """``root`` (its ``servelab.toml``) for the block, then ``servelab down`` and no process left
    under ``root`` (a test that brings it up itself)."""
    try:
        yield root
    finally:
        servelab_in(root, "down")
    assert live_procs_under(root) == []
