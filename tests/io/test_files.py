"""The one file writer, against real files: whole or nothing, directories made, errors typed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from servelab.errors import HostError
from servelab.io.files import write_atomic, write_files, write_if_changed


def test_write_atomic_creates_the_directory_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "out.txt"
    write_atomic(target, b"hello")
    assert target.read_bytes() == b"hello"
    write_atomic(target, b"bye")
    assert target.read_bytes() == b"bye"
    assert sorted(p.name for p in target.parent.iterdir()) == ["out.txt"]


def test_write_if_changed_skips_identical_bytes(tmp_path: Path) -> None:
    target = tmp_path / "x.md"
    assert write_if_changed(target, b"1") is True
    mtime = target.stat().st_mtime_ns
    assert write_if_changed(target, b"1") is False
    assert target.stat().st_mtime_ns == mtime
    assert write_if_changed(target, b"2") is True
    assert target.read_bytes() == b"2"


def test_write_files_reports_written_and_unchanged(tmp_path: Path) -> None:
    files = {"b.txt": b"b", "sub/a.txt": b"a"}
    assert write_files(tmp_path, files) == (["b.txt", "sub/a.txt"], [])
    assert write_files(tmp_path, {**files, "b.txt": b"B"}) == (["b.txt"], ["sub/a.txt"])
    assert (tmp_path / "b.txt").read_bytes() == b"B"


def test_a_failed_write_raises_host_error_and_keeps_the_old_file(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(HostError, match="cannot write"):
        write_atomic(blocker / "out.txt", b"x")
    target = tmp_path / "dir-target"
    target.mkdir()
    (target / "inside").write_text("kept")
    with pytest.raises(HostError):
        write_atomic(target, b"x")  # renaming a file over a non-empty directory fails
    assert (target / "inside").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir-target", "file"]


_SHORT_WRITE = """
import resource, signal, sys
from pathlib import Path
from servelab.errors import HostError
from servelab.io.files import write_atomic
target = Path(sys.argv[1])
target.write_bytes(b"old")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
try:
    write_atomic(target, b"x" * 5000)
except HostError as exc:
    print("HostError:", exc)
print("kept:", target.read_bytes().decode())
"""


def test_a_short_write_raises_host_error_and_keeps_the_old_file(tmp_path: Path) -> None:
    # A real short write: the file size limit (RLIMIT_FSIZE) cuts the write at 1000 bytes.
    target = tmp_path / "big.bin"
    proc = subprocess.run(
        [sys.executable, "-c", _SHORT_WRITE, str(target)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert "HostError:" in proc.stdout, proc.stdout + proc.stderr
    assert "kept: old" in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.bin"]
