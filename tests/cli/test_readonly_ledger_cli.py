"""A ledger that cannot be written (here on a read-only mount, which even root cannot write) is
still read by every command that only reads it (issue: ``case list`` and ``report`` tried to
write and failed); a command that writes fails in one line. Real processes, a real mount."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.case.record import CaseRecord, Suspect
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from tests.support import run_cli


@pytest.fixture
def read_only_ledger(tmp_path: Path) -> Iterator[Path]:
    """A ledger with a case, in WAL mode, on a tmpfs remounted read-only."""
    mount = tmp_path / "ro"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        with Ledger.open(mount / "l.db") as ledger:
            case = ledger.add(
                CaseRecord(id=0, at=NOW, title="agentic sessions hang", status="open")
            )
            ledger.add(Suspect(at=NOW, case_id=case, target="component:proxy", reason="stalls"))
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        yield mount / "l.db"
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_the_readers_read_it_and_a_writer_fails_in_one_line(
    read_only_ledger: Path, tmp_path: Path
) -> None:
    led = ("--ledger", str(read_only_ledger))
    before = sorted(p.name for p in read_only_ledger.parent.iterdir())
    listed = run_cli("case", "list", "--json", *led)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)[0]["title"] == "agentic sessions hang"
    shown = run_cli("case", "show", "1", *led)
    assert shown.returncode == 0 and "suspect component:proxy" in shown.stdout
    report = run_cli("report", "--out", str(tmp_path / "docs"), *led)
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "docs" / "index.html").exists()
    exported = run_cli("ledger", "export", "--no-records", *led)
    assert exported.returncode == 0 and json.loads(exported.stdout)["cases"][0]["id"] == 1
    assert run_cli("ledger", "stats", *led).returncode == 0
    written = run_cli("case", "suspect", "1", "component:router", "--reason", "x", *led)
    assert written.returncode == 1 and len(written.stderr.strip().splitlines()) == 1
    assert "readonly" in written.stderr and "unexpected" not in written.stderr
    assert sorted(p.name for p in read_only_ledger.parent.iterdir()) == before


def test_a_ledger_path_named_like_a_secret_keeps_its_reason(tmp_path: Path) -> None:
    """Issue 38, defect D: ``ledger stats --ledger /etc/passwd`` said ``error: /etc/passwd:
    ***`` (the redaction read ``passwd:`` as a secret key): the reason is shown."""
    for path in (Path("/etc/passwd"), tmp_path / "secrets" / "db_password"):
        path.parent.mkdir(exist_ok=True)
        if not path.exists():
            path.write_text("root:x:0:0:root:/root:/bin/bash\n")
        result = run_cli("ledger", "stats", "--ledger", str(path))
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip() == (
            f"error: {path}: not a usable ledger: file is not a database "
            "(check --ledger/SERVELAB_LEDGER)"
        ), result.stderr
