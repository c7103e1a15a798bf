"""Every command that uses a ledger refuses a file that is not one, in one line, exit 2, and
writes nothing to it (issue 38, H3: ``ledger stats --ledger app.db`` made another program's
database a servelab ledger, 8 KB -> 147 KB, in WAL mode); an incomplete ledger is named so, never
"write failed" (M1); a FIFO is said to be one; a reading command never upgrades an older ledger.
Real processes, real SQLite files."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest

from servelab.io.ledger.migrations import SCHEMA_VERSION, migrate
from tests.support.clierrors import COMMANDS, NEEDS_A_LEDGER
from tests.support.clierrors import arun as _arun
from tests.support.clierrors import one_line as _one_line
from tests.support.clierrors import run as _run
from tests.support.servers import served, streaming_app

#: Commands that open an existing ledger, reading or writing, and one that makes a new one.
LEDGER_COMMANDS = [*NEEDS_A_LEDGER, "case open"]
#: The commands that only read the ledger.
READERS = ["case show", "case list", "report", "ledger export", "ledger stats"]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _app_db(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (name, pw)")
    conn.execute("INSERT INTO users VALUES ('ada', 'x')")
    conn.commit()
    conn.close()
    return path


def _refused(result_code: int, stderr: str, path: Path, digest: str) -> str:
    assert result_code == 2, stderr
    line = _one_line(stderr)
    assert _digest(path) == digest, "the file was written"
    assert "write failed" not in line
    return line


@pytest.mark.parametrize("command", LEDGER_COMMANDS)
def test_another_programs_database_is_refused_by_every_command(
    command: str, tmp_path: Path
) -> None:
    app = _app_db(tmp_path / "app.db")
    digest = _digest(app)
    result = _run(*COMMANDS[command], "--ledger", str(app), cwd=tmp_path)
    line = _refused(result.returncode, result.stderr, app, digest)
    assert line == (
        f"error: {app} is an SQLite database but not a servelab ledger (tables: users); "
        "check --ledger/SERVELAB_LEDGER"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"], "nothing made beside it"
    conn = sqlite3.connect(app)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


async def test_bench_refuses_another_programs_database_before_measuring(tmp_path: Path) -> None:
    app = _app_db(tmp_path / "app.db")
    digest = _digest(app)
    async with served(streaming_app(gap_s=0.001)) as url:
        code, out, err = await _arun(
            "bench", "--url", url, "--requests", "1", "--ledger", str(app), cwd=tmp_path
        )
    assert "not a servelab ledger (tables: users)" in _refused(code, err, app, digest)
    assert out == ""


@pytest.mark.parametrize("command", ["ledger stats", "case list", "case open", "ledger prune"])
def test_an_incomplete_ledger_names_what_is_missing_never_write_failed(
    command: str, tmp_path: Path
) -> None:
    v3 = tmp_path / "v3.db"
    conn = sqlite3.connect(v3)
    conn.execute("PRAGMA user_version = 3")
    conn.execute("CREATE TABLE runs (id)")
    conn.commit()
    conn.close()
    digest = _digest(v3)
    result = _run(*COMMANDS[command], "--ledger", str(v3), cwd=tmp_path)
    line = _refused(result.returncode, result.stderr, v3, digest)
    assert line.startswith(f"error: {v3}: not a complete servelab ledger (version 3, missing ")
    v0 = tmp_path / "v0.db"
    conn = sqlite3.connect(v0)
    conn.execute("CREATE TABLE knob_changes (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    digest = _digest(v0)
    result = _run(*COMMANDS[command], "--ledger", str(v0), cwd=tmp_path)
    line = _refused(result.returncode, result.stderr, v0, digest)
    assert f"{v0}: not a complete servelab ledger (version 0" in line and "knob_changes" in line


def test_a_fifo_is_said_to_be_one(tmp_path: Path) -> None:
    fifo = tmp_path / "l.fifo"
    os.mkfifo(fifo)
    result = _run("ledger", "stats", "--ledger", str(fifo), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert _one_line(result.stderr) == (
        f"error: {fifo} is a FIFO or pipe, not a ledger file (check --ledger/SERVELAB_LEDGER)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.fifo"]


def test_a_reading_command_leaves_an_older_ledger_and_a_writing_one_upgrades_it(
    tmp_path: Path,
) -> None:
    old = tmp_path / "old.db"
    raw = sqlite3.connect(old, isolation_level=None)
    raw.execute("BEGIN IMMEDIATE")
    migrate(raw, source=str(old), upto=5)
    raw.execute("COMMIT")
    raw.close()
    digest = _digest(old)
    for command in READERS:
        result = _run(*COMMANDS[command], "--ledger", str(old), cwd=tmp_path)
        assert result.returncode == 1, (command, result.stderr)
        line = _one_line(result.stderr)
        assert f"older ledger of version 5 (this servelab's is {SCHEMA_VERSION})" in line
        assert f"servelab ledger vacuum --ledger {old}" in line
        assert _digest(old) == digest and sorted(tmp_path.iterdir()) == [old], command
    assert _run("ledger", "vacuum", "--ledger", str(old), cwd=tmp_path).returncode == 0
    listed = _run("case", "list", "--ledger", str(old), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
