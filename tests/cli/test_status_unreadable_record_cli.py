"""`status` with a pid record that does not read as one (issue 38, known after the seventeenth
pass): broken JSON, over 64 KiB, a FIFO, a dangling link. It showed ``-`` with no word of why;
now ``- (pid record unreadable)``, and ``--json`` ``pid_source`` says so. Real files and a real
``servelab status`` process; nothing runs on the spec's ports."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from servelab.io.hosts.processes import MAX_RECORD_BYTES
from tests.support import run_cli
from tests.support.specs import write_pd_spec


def _broken(path: Path) -> None:
    path.write_bytes(b'{"pid": 12, "pgid"')


def _oversized(path: Path) -> None:
    path.write_bytes(b" " * (MAX_RECORD_BYTES + 1))


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dangling(path: Path) -> None:
    path.symlink_to(path.parent / "gone.json")


@pytest.mark.parametrize("make", [_broken, _oversized, _fifo, _dangling])
def test_status_says_a_pid_record_is_unreadable(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    spec = str(write_pd_spec(tmp_path))
    run = tmp_path / "state" / "run"
    run.mkdir(parents=True)
    make(run / "decode.json")
    done = run_cli("status", "-f", spec, "--json", timeout=60)
    assert done.returncode == 1, done.stderr  # nothing is ready
    rows = {row["service"]: row for row in json.loads(done.stdout)}
    assert rows["decode"]["pid"] is None and rows["decode"]["pid_source"] == "pid record unreadable"
    assert rows["prefill"]["pid_source"] != "pid record unreadable", rows["prefill"]
    text = run_cli("status", "-f", spec, timeout=60)
    pids = _pid_cells(text.stdout)
    assert pids["decode"] == "- (pid record unreadable)", text.stdout
    assert pids["prefill"] == "-", text.stdout


def _pid_cells(table: str) -> dict[str, str]:
    """Each service's pid cell of the status table, its wrapped lines joined."""
    cells: dict[str, list[str]] = {}
    service = ""
    for line in table.splitlines():
        parts = [part.strip() for part in line.split("│")]
        if len(parts) < 5:
            continue
        service = parts[1] or service
        cells.setdefault(service, []).append(parts[4])
    return {name: " ".join(w for w in words if w) for name, words in cells.items()}
