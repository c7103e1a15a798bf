"""Ledger and output failures are one line on stderr (no traceback), with ``--json`` a failure
document: a ledger newer than this servelab, an unwritable export or report path, and read-only
commands given a ledger that does not exist or an empty file, which they never create or write.
Real processes, real files, real loopback servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.io.ledger.ledger import Ledger
from tests.support import free_port
from tests.support.clierrors import (
    COMMANDS,
    NEEDS_A_LEDGER,
    arun,
    failure_doc,
    newer_ledger,
    one_line,
    run,
)
from tests.support.servers import served, streaming_app


async def test_bench_with_a_newer_ledger_is_one_line(tmp_path: Path) -> None:
    ledger = newer_ledger(tmp_path / "new.db")
    async with served(streaming_app(gap_s=0.001)) as url:
        code, out, err = await arun(
            "bench", "--url", url, "--requests", "1", "--ledger", str(ledger), cwd=tmp_path
        )
    assert code == 1
    line = one_line(err)
    assert str(ledger) in line and "newer" in line
    assert out == ""


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_soak_case_with_a_newer_ledger_is_one_line(as_json: bool, tmp_path: Path) -> None:
    ledger = newer_ledger(tmp_path / "new.db")
    url = f"http://127.0.0.1:{free_port()}"
    json_flag = ("--json",) if as_json else ()
    result = run("soak", "--url", url, "--case", "1", "--ledger", str(ledger), *json_flag,
                  cwd=tmp_path)  # fmt: skip
    assert result.returncode == 1
    assert "newer" in one_line(result.stderr)
    if as_json:
        assert "newer" in failure_doc(result.stdout)["error"]


async def test_bench_export_to_an_unwritable_path_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("", encoding="utf-8")
    async with served(streaming_app(gap_s=0.001)) as url:
        code, _out, err = await arun(
            "bench", "--url", url, "--requests", "2", "--no-ledger",
            "--export", str(tmp_path / "afile" / "out"), cwd=tmp_path,
        )  # fmt: skip
    assert code == 1
    line = one_line(err)
    assert f"cannot write {tmp_path / 'afile' / 'out'}" in line


@pytest.mark.parametrize("out", ["afile", "afile/sub"])
def test_report_to_an_unwritable_path_is_one_line(out: str, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("", encoding="utf-8")
    Ledger.open(tmp_path / "l.db").close()
    result = run("report", "--out", out, "--ledger", "l.db", cwd=tmp_path)
    assert result.returncode == 1
    assert "cannot write afile" in one_line(result.stderr)


@pytest.mark.parametrize("command", NEEDS_A_LEDGER)
def test_a_ledger_that_does_not_exist_is_refused_and_not_created(
    command: str, tmp_path: Path
) -> None:
    missing = tmp_path / "nonexistent" / "dir" / "l.db"
    result = run(*COMMANDS[command], "--ledger", str(missing), cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    line = one_line(result.stderr)
    assert f"no ledger at {missing}" in line
    assert list(tmp_path.iterdir()) == [], "nothing may be created"


@pytest.mark.parametrize("command", NEEDS_A_LEDGER)
def test_an_empty_file_is_not_a_ledger_and_stays_empty(command: str, tmp_path: Path) -> None:
    """A 0-byte file (``touch``, a wrong path) is refused as a missing one is: SQLite would
    otherwise make it a new ledger under a command that only reads."""
    empty = tmp_path / "empty.db"
    empty.touch()
    result = run(*COMMANDS[command], "--ledger", str(empty), cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert f"no ledger at {empty}: the file is empty" in one_line(result.stderr)
    assert empty.stat().st_size == 0 and list(tmp_path.iterdir()) == [empty], "nothing written"
