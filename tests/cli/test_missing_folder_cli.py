"""A user's file named in a folder that is not there is an input error (exit 2), refused before
any work, as every other refusal of where a writer writes (``io/overwrite.check_overwrite``):
``trace generate`` exited 1 (the thirtieth hostile pass's low), ``ledger export`` too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.io.ledger.ledger import Ledger
from tests.support import run_cli


def _ledger(tmp_path: Path) -> Path:
    ledger = tmp_path / "ledger.db"
    with Ledger.open(ledger) as opened:
        opened.record_bench_run(label="r", config={}, summary={"ok": 1}, records=[])
    return ledger


@pytest.mark.parametrize("as_json", [False, True])
def test_trace_generate_into_a_missing_folder_is_an_input_error(
    tmp_path: Path, as_json: bool
) -> None:
    out = tmp_path / "missing" / "folder" / "x.jsonl"
    done = run_cli("trace", "generate", str(out), *(("--json",) if as_json else ()))
    assert done.returncode == 2, done.stdout + done.stderr
    said = f"cannot write {out}: no directory {out.parent} (create it first)"
    if as_json:
        doc = json.loads(done.stdout)
        assert (doc["ok"], doc["exit_code"], doc["error"]) == (False, 2, said), doc
    else:
        assert said in done.stderr, done.stderr
    assert not (tmp_path / "missing").exists()


def test_a_folder_that_is_a_file_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("kept\n")
    out = tmp_path / "plain" / "x.jsonl"
    done = run_cli("trace", "generate", str(out))
    assert done.returncode == 2, done.stderr
    assert f"cannot write {out}: {out.parent} is not a directory" in done.stderr, done.stderr
    assert (tmp_path / "plain").read_text() == "kept\n"


def test_a_dangling_link_as_the_folder_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    out = tmp_path / "gone" / "x.jsonl"
    done = run_cli("trace", "generate", str(out))
    assert done.returncode == 2, done.stderr
    assert f"no directory {out.parent}" in done.stderr, done.stderr


def test_ledger_export_into_a_missing_folder_is_an_input_error(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    out = tmp_path / "missing" / "export.json"
    done = run_cli("ledger", "export", "--ledger", str(ledger), str(out))
    assert done.returncode == 2, done.stderr
    assert f"no directory {out.parent} (create it first)" in done.stderr, done.stderr


def test_a_csv_export_still_makes_its_folder(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    out = tmp_path / "new" / "csv"
    done = run_cli("ledger", "export", "--ledger", str(ledger), "--format", "csv", str(out))
    assert done.returncode == 0, done.stderr
    assert (out / "manifest.json").is_file()


def test_a_file_in_the_current_folder_is_written(tmp_path: Path) -> None:
    done = run_cli("trace", "generate", "x.jsonl", "--sessions", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "x.jsonl").stat().st_size > 0
