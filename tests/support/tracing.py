"""A PD spec with ``[tracing]``: the reference topology of :mod:`tests.support.specs` whose
router and simulated workers export their spans to a free loopback port."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support import free_ports
from tests.support.specs import PdPorts, write_pd_spec

__all__ = ["write_traced_spec"]


def write_traced_spec(root: Path, *, wait_s: float = 30.0, **options: Any) -> tuple[Path, int]:
    """:func:`~tests.support.specs.write_pd_spec` plus a ``[tracing]`` table on a free port;
    the spec's path and the port the receiver will listen on."""
    *deployment, port = free_ports(6)  # drawn together: the receiver's port is none of theirs
    spec = write_pd_spec(root, ports=PdPorts(*deployment), **options)
    with spec.open("a", encoding="utf-8") as f:
        f.write(f'\n[tracing]\nendpoint = "127.0.0.1:{port}"\nwait_s = {wait_s}\n')
    return spec, port
