"""A deployment whose one service cannot start, for tests of what a command refuses before it
restarts anything: two of them sharing one ledger (``--ledger``) are two deployments, and a
command that gets past its checks fails at its restart (``exit 3``), so how far it got shows."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from servelab.io.hosts.place import read_place
from tests.support import free_ports
from tests.support.history import K
from tests.support.stack import start_process, stop_process, wait_http

__all__ = ["alpha_and_beta", "answering", "mark", "same_named", "unstartable_spec"]


def unstartable_spec(folder: Path, name: str, value: str = "256", port: int | None = None) -> Path:
    """``folder/servelab.toml``: deployment ``name`` (state folder ``folder/state``), one
    generic ``decode`` on ``port`` (default: a free one) whose start exits 3, its env file
    ``folder/decode.env`` holding the reference knob ``K`` at ``value``."""
    (port,) = (port,) if port is not None else free_ports(1)
    folder.mkdir()
    (folder / "decode.env").write_text(f"{K}={value}\n")
    spec = folder / "servelab.toml"
    spec.write_text(
        f'name = "{name}"\nstate_dir = "state"\n[services.decode]\nrole = "generic"\n'
        f'url = "http://127.0.0.1:{port}"\nstart = "exit 3"\nenv_file = "decode.env"\n'
        f'knobs = ["{K}"]\nready_timeout_s = 3\nstart_timeout_s = 3\n'
    )
    return spec


def alpha_and_beta(root: Path) -> tuple[Path, Path]:
    """Deployments ``alpha`` (``root/a``) and ``beta`` (``root/b``), each an
    :func:`unstartable_spec` with the knob at 256."""
    return unstartable_spec(root / "a", "alpha"), unstartable_spec(root / "b", "beta")


def same_named(root: Path) -> tuple[Path, Path]:
    """Two deployments both named ``servelab`` (the default name) in ``root/c`` and ``root/d2``,
    each an :func:`unstartable_spec` on its own free port with the knob at 512: two deployments
    all the same (issue 38, the sixteenth pass), told apart by their marks only."""
    return unstartable_spec(root / "c", "servelab", "512"), unstartable_spec(
        root / "d2", "servelab", "512"
    )


def mark(spec: Path) -> str:
    """The mark of an :func:`unstartable_spec`'s ``decode``: ``name/decode@local:<port>#<place>``
    (the id of its state folder ``state`` beside it)."""
    text = spec.read_text()
    name = re.search(r'^name = "([^"]+)"', text, re.M)
    port = re.search(r"^url = \"http://127\.0\.0\.1:(\d+)\"", text, re.M)
    assert name is not None and port is not None, text
    place = read_place(spec.parent / "state")  # made by its first change or launch
    assert place is not None, spec
    return f"{name[1]}/decode@local:{port[1]}#{place}"


@contextlib.contextmanager
def answering(spec: Path) -> Iterator[None]:
    """A stranger's server answering 200 at an :func:`unstartable_spec`'s decode ``/health`` for
    the block: the deployment is up for the commands that refuse one that is not (``ab``,
    ``tune``, their ``--resume``, ``case test``), and the first arm's restart then fails (its port
    held by a process not this deployment's)."""
    port = re.search(r'^url = "http://127\.0\.0\.1:(\d+)"', spec.read_text(), re.M)
    assert port is not None
    served = spec.parent / "served"
    served.mkdir(exist_ok=True)
    (served / "health").write_text("ok\n")
    argv = [sys.executable, "-m", "http.server", port[1], "--bind", "127.0.0.1",
            "--directory", str(served)]  # fmt: skip
    proc = start_process(argv, spec.parent / "served.log")
    try:
        wait_http(f"http://127.0.0.1:{port[1]}/health", 30, proc)
        yield
    finally:
        stop_process(proc)
