"""``servelab ledger export`` to outputs that fail or are not plain files, as real processes on
real ledger files: an output that fails mid-write (a reader that leaves, a full file system)
fails the command loudly and leaves no file that looks complete; a link is refused, a device or a
shell's pipe written as it is; the ledger's own path refused."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import run_cli
from tests.support.ledgerexport import ok, seed
from tests.support.tmpfs import tmpfs


@pytest.fixture(scope="module")
def _seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return seed(tmp_path_factory.mktemp("seeded") / "ledger.db")


@pytest.fixture
def ledger_file(_seeded: Path, tmp_path: Path) -> Path:
    """A test's own copy of the module's seeded ledger (tests prune and vacuum it)."""
    path = tmp_path / "ledger.db"
    shutil.copyfile(_seeded, path)
    return path


def test_a_reader_that_leaves_early_fails_the_export(ledger_file: Path) -> None:
    # servelab ledger export - | head -c 100
    with subprocess.Popen(
        [sys.executable, "-m", "servelab", "ledger", "export", "-", "--ledger", str(ledger_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as proc:  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        assert len(proc.stdout.read(100)) == 100
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 1, err
    assert "write to standard output failed after" in err and "closed the pipe" in err


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "tiny") as mount:
        yield mount


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv"])
def test_a_full_file_system_fails_the_export_and_leaves_nothing(
    ledger_file: Path, full_disk: Path, fmt: str
) -> None:
    target = full_disk / ("out" if fmt == "csv" else f"out.{fmt}")
    done = run_cli("ledger", "export", "--format", fmt, str(target), "--ledger", str(ledger_file))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "No space left on device" in done.stderr and "failed after" in done.stderr
    left = sorted(p.name for p in full_disk.rglob("*") if p.is_file())
    assert left == []  # no export, no temporary file, no manifest


def test_an_export_writes_where_it_is_told_and_only_there(
    ledger_file: Path, tmp_path: Path
) -> None:
    """A link is neither replaced nor written through (refused, exit 2: the sixth hostile pass),
    /dev/null stays a device, a shell's ``>(...)`` gets the whole document, and /dev/full fails
    saying so (issue: the atomic rename replaced them)."""
    led = ("--no-records", "--ledger", str(ledger_file))
    target = tmp_path / "kept.json"
    link = tmp_path / "latest.json"
    link.symlink_to(target)
    refused = run_cli("ledger", "export", str(link), *led)
    assert refused.returncode == 2 and "it is a symbolic link" in refused.stderr
    assert link.is_symlink() and not target.exists()
    ok("ledger", "export", str(target), *led)
    assert json.loads(target.read_text())["cases"][0]["title"] == "hang"
    ok("ledger", "export", "/dev/null", *led)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    full = run_cli("ledger", "export", "/dev/full", *led)
    assert full.returncode == 1 and "No space left on device" in full.stderr
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    script = f'"$0" -m servelab ledger export >(cat > {tmp_path}/piped.json) {" ".join(led)}'
    piped = subprocess.run(["bash", "-c", script + "; wait $!", sys.executable],
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert json.loads((tmp_path / "piped.json").read_text()) == json.loads(target.read_text())


def test_an_export_onto_the_ledger_itself_is_refused(ledger_file: Path, tmp_path: Path) -> None:
    """``ledger export`` to the ledger's own path (or a link to it, or its -wal) replaced the
    ledger with the JSON and said "exported": it is refused, exit 2, the ledger untouched."""
    before = ledger_file.read_bytes()
    link = tmp_path / "link.db"
    link.symlink_to(ledger_file)
    wal = ledger_file.with_name(ledger_file.name + "-wal")
    for out in (ledger_file, link, wal):
        refused = run_cli("ledger", "export", str(out), "--ledger", str(ledger_file))
        assert refused.returncode == 2, refused.stderr
        assert "is the ledger being exported" in refused.stderr
    assert ledger_file.read_bytes() == before
    assert ok("ledger", "stats", "--ledger", str(ledger_file)).returncode == 0


@pytest.mark.parametrize("kind", ["file", "fifo", "device", "dangling link"])
def test_csv_into_something_that_is_not_a_directory_is_refused(
    ledger_file: Path, tmp_path: Path, kind: str
) -> None:
    """``--format csv OUT`` writes a file per table into the directory OUT: an OUT that is a file
    (a FIFO, /dev/full, a link to nowhere) once ended in exit 1 ``OUT/manifest.json: Not a
    directory``; it is refused, exit 2, naming OUT and why, nothing written."""
    out = tmp_path / "out.csv"
    if kind == "file":
        out.write_text("kept\n")
    elif kind == "fifo":
        os.mkfifo(out)
    elif kind == "dangling link":
        out.symlink_to(tmp_path / "nowhere")
    else:
        out = Path("/dev/full")
    before = sorted(tmp_path.iterdir())
    for extra in ([], ["--json"]):
        done = run_cli("ledger", "export", "--format", "csv", str(out), "--ledger",
                       str(ledger_file), *extra, cwd=tmp_path)  # fmt: skip
        assert done.returncode == 2, done.stdout + done.stderr
        said = json.loads(done.stdout)["error"] if extra else done.stderr
        assert "Invalid value for OUT" in said and f"{str(out)!r} is not one" in said, said
    assert sorted(tmp_path.iterdir()) == before
    if kind == "file":
        assert out.read_text() == "kept\n"


def test_csv_into_a_link_to_a_folder_is_refused(ledger_file: Path, tmp_path: Path) -> None:
    """``--format csv OUT`` with OUT a symbolic link to a folder wrote its tables through the
    link, into the folder it names (someone's ``/etc``); servelab writes no file through a link:
    refused, exit 2, naming the link and its target, nothing written there."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    out = tmp_path / "out"
    out.symlink_to(folder)
    for extra in ([], ["--json"]):
        done = run_cli("ledger", "export", "--format", "csv", str(out), "--ledger",
                       str(ledger_file), *extra, cwd=tmp_path)  # fmt: skip
        assert done.returncode == 2, done.stdout + done.stderr
        said = json.loads(done.stdout)["error"] if extra else done.stderr
        assert "Invalid value for OUT" in said and "it is a symbolic link" in said, said
        assert str(folder) in said, said
    assert list(folder.iterdir()) == []
    assert ok("ledger", "export", "--format", "csv", str(folder), "--ledger",
              str(ledger_file)).returncode == 0  # fmt: skip
    assert (folder / "manifest.json").is_file()
