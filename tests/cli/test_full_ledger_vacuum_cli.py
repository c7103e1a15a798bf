"""``ledger vacuum`` on a full disk (issue 38, the sixteenth pass): it said "read failed: database
or disk is full", which reads as a broken ledger; it says the ledger's disk is full, naming the
ledger, in one line, exit 1, the ledger as it was. A real full tmpfs, a real process."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from servelab.io.ledger.ledger import Ledger
from tests.support import run_cli
from tests.support.tmpfs import fill, tmpfs


def test_vacuum_on_a_full_disk_says_the_disk_is_full(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "tiny", "2m") as mount:
        ledger = mount / "l.db"
        with Ledger.open(ledger):
            pass
        opened = run_cli("case", "open", "case 19", "--ledger", str(ledger))
        assert opened.returncode == 0, opened.stderr
        with sqlite3.connect(ledger) as db:  # 640 KiB of notes a VACUUM copies: more than is left
            db.executemany(
                "INSERT INTO case_evidence (case_id, at, kind, note) VALUES (1, 'x', 'note', ?)",
                [(f"{n} " + "n" * 1000,) for n in range(640)],
            )
        with sqlite3.connect(ledger) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        before = ledger.read_bytes()
        fill(mount)
        with (mount / "filler").open("r+b") as filler:  # 160 KiB free: it opens, no VACUUM fits
            filler.truncate(filler.seek(0, 2) - (160 << 10))
        done = run_cli("ledger", "vacuum", "--ledger", str(ledger), timeout=60)
        assert done.returncode == 1, done.stdout + done.stderr
        assert f"{ledger}: vacuum failed: its disk is full" in done.stderr, done.stderr
        assert "read failed" not in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert ledger.read_bytes() == before
        (mount / "filler").unlink()
        listed = run_cli("case", "list", "--ledger", str(ledger))
        assert listed.returncode == 0 and "case 19" in listed.stdout, listed.stderr
