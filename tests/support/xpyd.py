"""``examples/local-2p2d.toml`` (the real sglang-router) or its twin on smg,
``examples/local-2p2d-smg.toml``, on free loopback ports, with its state and env files under a
temporary directory: two simulated prefills, two simulated decodes, the real router."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.support import REPO, free_ports

__all__ = ["EXAMPLE_2P2D", "EXAMPLE_2P2D_SMG", "EXAMPLE_PORTS", "write_2p2d_spec"]

EXAMPLE_2P2D = REPO / "examples" / "local-2p2d.toml"
EXAMPLE_2P2D_SMG = REPO / "examples" / "local-2p2d-smg.toml"
#: The example's ports, in the order :func:`write_2p2d_spec` returns their replacements:
#: prefill-1, its bootstrap, prefill-2, its bootstrap, decode-1, decode-2, router, prometheus.
EXAMPLE_PORTS = ("31100", "31198", "31101", "31199", "31102", "31103", "31110", "31190")
#: The smg twin's, in the same order.
_SMG_PORTS = ("31200", "31298", "31201", "31299", "31202", "31203", "31210", "31290")


def write_2p2d_spec(
    root: Path, *, time_scale: str = "0.02", router: str = "sglang-router"
) -> tuple[Path, list[int]]:
    """Write ``root/servelab.toml`` (the example of ``router``, ``sglang-router`` or ``smg``, on
    free ports, state under ``root/state``) and ``root/env/*.env`` (the simulators at
    ``time_scale``); return the spec and its ports."""
    example, names = (EXAMPLE_2P2D_SMG, _SMG_PORTS) if router == "smg" else (
        EXAMPLE_2P2D, EXAMPLE_PORTS)  # fmt: skip
    text = example.read_text()
    ports = free_ports(len(names))
    # one pass: a free port drawn equal to a later example port is not replaced again
    new_of = dict(zip(names, map(str, ports), strict=True))
    text = re.sub(r"\b(" + "|".join(names) + r")\b", lambda m: new_of[m.group(1)], text)
    text = re.sub(r'state_dir = ".*"', 'state_dir = "state"', text)
    text = text.replace("health_check_interval_s = 2", "health_check_interval_s = 1")
    shutil.copytree(REPO / "examples" / "env", root / "env")
    for path in (root / "env").glob("*.env"):
        path.write_text(path.read_text().replace("TIME_SCALE=0.25", f"TIME_SCALE={time_scale}"))
    spec = root / "servelab.toml"
    spec.write_text(text)
    return spec, ports
