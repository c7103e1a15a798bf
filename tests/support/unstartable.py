"""A deployment whose one service cannot start, for tests of what a command refuses before it
restarts anything: two of them sharing one ledger (``--ledger``) are two deployments, and a
command that gets past its checks fails at its restart (``exit 3``), so how far it got shows."""

from __future__ import annotations

import re
from pathlib import Path

from servelab.io.hosts.place import read_place
from tests.support import free_ports
from tests.support.history import K

__all__ = ["alpha_and_beta", "mark", "same_named", "unstartable_spec"]


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
