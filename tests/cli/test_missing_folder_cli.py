"""A user's file named in a folder that is not there is an input error (exit 2), refused before
any work, as every other refusal of where a writer writes (``io/overwrite.check_overwrite``):
``trace generate`` exited 1 (the thirtieth hostile pass's low), ``ledger export`` too."""

from __future__ import annotations

import json
import os
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


def _not_a_folder(tmp_path: Path, kind: str) -> tuple[Path, str]:
    """A csv export's folder under a parent that cannot hold it, and the words refusing it."""
    if kind == "devnull":
        return Path("/dev/null/x"), "/dev/null is not a directory"
    parent = tmp_path / kind
    if kind == "plain":
        parent.write_text("kept\n")
    elif kind == "fifo":
        os.mkfifo(parent)
    elif kind == "dangling":
        parent.symlink_to(tmp_path / "nowhere")
        return parent / "sub", f"no directory {parent} (a link to nothing)"
    else:  # a link loop
        parent.symlink_to(parent)
        return parent / "sub", f"no directory {parent} (a link loop)"
    return parent / "x", f"{parent} is not a directory"


@pytest.mark.parametrize("kind", ["plain", "fifo", "devnull", "dangling", "loop"])
@pytest.mark.parametrize("as_json", [False, True])
def test_a_csv_exports_parent_that_is_no_folder_is_an_input_error(
    tmp_path: Path, kind: str, as_json: bool
) -> None:
    """A csv export makes its folder (and the folders above it), but one that is there and no
    folder (a file, a FIFO, ``/dev/null``) or a link to nothing is refused before any work,
    exit 2, as the json export's and ``trace generate``'s: it exited 1, "Not a directory" or
    "File exists" (the thirty-first hostile pass)."""
    ledger = _ledger(tmp_path)
    out, said = _not_a_folder(tmp_path, kind)
    args = ("ledger", "export", "--ledger", str(ledger), "--format", "csv", str(out))
    done = run_cli(*args, *(("--json",) if as_json else ()))
    assert done.returncode == 2, done.stdout + done.stderr
    if as_json:
        doc = json.loads(done.stdout)
        assert (doc["ok"], doc["exit_code"]) == (False, 2), doc
        assert said in doc["error"], doc
    else:
        assert said in done.stderr, done.stderr
    if kind == "plain":
        assert (tmp_path / "plain").read_text() == "kept\n"
    assert not (tmp_path / "nowhere").exists()


def test_a_dangling_link_as_the_csv_folder_is_an_input_error(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    out = tmp_path / "gone"
    out.symlink_to(tmp_path / "nowhere")
    done = run_cli("ledger", "export", "--ledger", str(ledger), "--format", "csv", str(out))
    assert done.returncode == 2, done.stderr
    assert "is not one" in done.stderr, done.stderr
    assert not (tmp_path / "nowhere").exists()


def test_a_link_loop_as_the_folder_is_an_input_error(tmp_path: Path) -> None:
    """A folder that is a link to itself is no folder: exit 2 before any work (it was exit 1,
    "Too many levels of symbolic links")."""
    ledger = _ledger(tmp_path)
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    out = tmp_path / "loop" / "export.json"
    done = run_cli("ledger", "export", "--ledger", str(ledger), str(out))
    assert done.returncode == 2, done.stderr
    assert f"no directory {out.parent} (a link loop)" in done.stderr, done.stderr


def test_trace_generate_into_a_name_too_long_is_an_input_error(tmp_path: Path) -> None:
    """The thirty-first pass's low: a 300-character file name exited 1 after the work."""
    out = tmp_path / ("t" * 300 + ".jsonl")
    done = run_cli("trace", "generate", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "its name is 306 bytes" in done.stderr and "at most 255 bytes" in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_ledger_export_to_an_empty_out_is_an_input_error(tmp_path: Path, fmt: str) -> None:
    """The thirty-second pass's low: ``ledger export --format csv ""`` exported into the current
    folder (an empty path is "." to the system)."""
    ledger = _ledger(tmp_path)
    done = run_cli("ledger", "export", "--ledger", str(ledger), "--format", fmt, "", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "OUT: is empty" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.db"]


def test_ledger_export_csv_through_a_dotdot_over_a_file_is_refused_before_any_work(
    tmp_path: Path,
) -> None:
    """The thirty-second pass's low: ``new/../afile/o`` (``new`` missing, ``afile`` a file) was
    read as text, passed the check and failed after ``new`` was made (exit 1, "File exists")."""
    ledger = _ledger(tmp_path)
    (tmp_path / "afile").write_text("kept")
    done = run_cli("ledger", "export", "--ledger", str(ledger), "--format", "csv",
                   "new/../afile/o", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{tmp_path / 'afile'} is not a directory" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "ledger.db"]
    made = run_cli("ledger", "export", "--ledger", str(ledger), "--format", "csv",
                   "new/../sub/o", cwd=tmp_path)  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    assert (tmp_path / "sub" / "o" / "manifest.json").is_file()
