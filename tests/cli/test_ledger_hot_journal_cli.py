"""A ledger beside a hot rollback journal (issue 38, the thirteenth pass): a writer killed in the
middle of a transaction leaves ``ledger.db-journal`` and a half-written ``ledger.db``; every
command said "not a usable ledger: database disk image is malformed" (exit 1), a reading one
and a writing one alike. Now a command that writes rolls the interrupted write back (SQLite's
own recovery: what was committed before it is all there), and one that only reads says what it
is and what to do, in one line, touching neither file. A real writer process killed with its
transaction open, real SQLite files."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from servelab.errors import StoreError
from servelab.io.ledger.recognize import look
from tests.support import run_cli

#: A writer that switches the ledger to a rollback journal, overwrites pages of it (a cache of one
#: page: they reach the file before any commit) and dies with its transaction open.
_KILLED_WRITER = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode=DELETE")
conn.execute("PRAGMA cache_size=1")
conn.execute("BEGIN IMMEDIATE")
conn.execute("CREATE TABLE junk (x)")
for _ in range(200):
    conn.execute("INSERT INTO junk VALUES (?)", (os.urandom(3000),))
for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
    conn.execute(f'DROP TABLE "{name}"')
os._exit(9)
"""


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--ledger", str(tmp_path / "ledger.db"), cwd=tmp_path, timeout=60)


@pytest.fixture
def crashed(tmp_path: Path) -> Path:
    """A ledger holding case 1, then a writer killed mid-transaction: the hot journal beside it."""
    opened = _cli(tmp_path, "case", "open", "the hang after the knob")
    assert opened.returncode == 0, opened.stderr
    ledger = tmp_path / "ledger.db"
    killed = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(ledger)], check=False)
    assert killed.returncode == 9
    journal = tmp_path / "ledger.db-journal"
    assert journal.stat().st_size > 0
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):  # read past its journal
        conn = sqlite3.connect(f"{ledger.as_uri()}?immutable=1", uri=True)
        conn.execute("SELECT * FROM cases").fetchall()
    return ledger


@pytest.mark.parametrize("command", [("case", "list"), ("ledger", "stats"), ("report",)])
def test_a_reading_command_says_a_write_was_interrupted_and_what_to_do(
    crashed: Path, command: tuple[str, ...]
) -> None:
    before = (crashed.read_bytes(), Path(f"{crashed}-journal").read_bytes())
    done = _cli(crashed.parent, *command)
    assert done.returncode == 1, (done.stdout, done.stderr)
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line, line
    assert "malformed" not in line
    assert "a write to the ledger was interrupted" in line and "ledger.db-journal" in line
    assert "servelab ledger vacuum --ledger" in line and "never delete the journal" in line
    assert (crashed.read_bytes(), Path(f"{crashed}-journal").read_bytes()) == before


def test_a_writing_command_rolls_the_interrupted_write_back(crashed: Path) -> None:
    vacuum = _cli(crashed.parent, "ledger", "vacuum")
    assert vacuum.returncode == 0, vacuum.stderr
    assert not Path(f"{crashed}-journal").exists()
    listed = _cli(crashed.parent, "case", "list")
    assert listed.returncode == 0, listed.stderr
    assert "the hang after the knob" in listed.stdout  # committed before the crash: kept


def test_look_names_the_journal_when_it_may_not_write(crashed: Path) -> None:
    with pytest.raises(StoreError) as caught:
        look(crashed, 1.0)
    assert str(caught.value).startswith(f"{crashed}: a write to the ledger was interrupted")
    assert look(crashed, 1.0, may_write=True).version > 0
    assert not os.path.exists(f"{crashed}-journal")
