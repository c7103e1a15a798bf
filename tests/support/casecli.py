"""What the ``servelab case`` CLI tests share (tests/cli/test_case_cli.py and
tests/cli/test_case_ledger_cli.py): the CLI's ``--json`` document, and a ledger seeded with the
reference history and a failed soak."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from servelab.io.ledger.ledger import Ledger
from tests.support import run_cli
from tests.support.history import K, seed_history
from tests.support.soakresult import failed_soak

__all__ = ["TARGET", "cli_json", "seeded_ledger"]

#: The reference knob as a case's suspect.
TARGET = f"knob:decode/{K}"


def cli_json(*args: str, code: int = 0, **kw: Any) -> Any:
    """``servelab ARGS --json`` as a real process: its document, once it exited with ``code``."""
    done = run_cli(*args, "--json", **kw)
    assert done.returncode == code, done.stderr + done.stdout
    return json.loads(done.stdout)


def seeded_ledger(path: Path) -> Path:
    """A ledger at ``path`` holding the reference history and a failed soak (the knob at 256)."""
    with Ledger.open(path) as ledger:
        seed_history(ledger)
        ledger.record_soak(failed_soak({K: "256"}))
    return path
