"""The one file writer, against real files: whole or nothing, directories made, errors typed."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.errors import HostError, OptionError
from servelab.io.files import (
    check_directory,
    write_atomic,
    write_files,
    write_if_changed,
    write_stream,
    write_to,
)
from servelab.io.overwrite import check_overwrite, unused_stem


def test_write_atomic_creates_the_directory_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "out.txt"
    write_atomic(target, b"hello", parents=True)
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


# -- streamed writes -------------------------------------------------------------------------------


def _pieces(total: int, size: int) -> Iterator[bytes]:
    for start in range(0, total, size):
        yield bytes((start // size + i) % 251 for i in range(min(size, total - start)))


def test_chunks_stream_through_writes_no_larger_than_the_limit(tmp_path: Path) -> None:
    target = tmp_path / "big.bin"
    expected = b"".join(_pieces(100_003, 997))
    assert write_atomic(target, _pieces(100_003, 997), chunk_bytes=4096) == len(expected)
    assert target.read_bytes() == expected
    assert write_atomic(target, expected, chunk_bytes=1) == len(expected)  # one byte per write
    assert target.read_bytes() == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.bin"]


def test_chunks_that_match_the_file_leave_it_untouched(tmp_path: Path) -> None:
    target = tmp_path / "r.jsonl"
    assert write_if_changed(target, iter([b"a\n", b"b\n"])) is True
    mtime = target.stat().st_mtime_ns
    assert write_if_changed(target, iter([b"a\nb", b"\n"])) is False
    assert target.stat().st_mtime_ns == mtime
    assert write_files(tmp_path, {"r.jsonl": iter([b"c\n"])}) == (["r.jsonl"], [])
    assert target.read_bytes() == b"c\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl"]


def test_a_failing_chunk_source_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_bytes(b"old")

    def broken() -> Iterator[bytes]:
        yield b"x" * 10_000
        raise RuntimeError("the ledger went away")

    with pytest.raises(RuntimeError):
        write_atomic(target, broken(), chunk_bytes=100)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def _small_tmpfs(where: Path, size: str) -> Path:
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    return where


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 1 MiB file system: writing more than that fails with ENOSPC."""
    mount = _small_tmpfs(tmp_path / "tiny", "1m")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_full_disk_mid_write_raises_and_leaves_no_partial_file(full_disk: Path) -> None:
    target = full_disk / "export.json"
    with pytest.raises(HostError, match=r"export.json failed after \d+ bytes: No space left"):
        write_atomic(target, _pieces(4 << 20, 65536), chunk_bytes=65536)
    assert list(full_disk.iterdir()) == []  # neither the target nor the temporary file
    assert shutil.disk_usage(full_disk).used < 64 * 1024


def test_a_stream_whose_reader_left_raises(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        with pytest.raises(HostError, match="after 0 bytes: the reader closed the pipe"):
            write_stream(write_end, _pieces(1 << 20, 4096), name="the pipe")
    finally:
        os.close(write_end)
    read_end, write_end = os.pipe()
    try:
        assert write_stream(write_end, [b"ok", b"\n"], chunk_bytes=1) == 3
        assert os.read(read_end, 10) == b"ok\n"
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_deployments_file_is_written_through_its_link(tmp_path: Path) -> None:
    """``follow_links=True`` (env and config files, which an operator may link on purpose): the
    link kept, its target written."""
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert write_atomic(link, [b"new ", b"bytes"], follow_links=True) == 9
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == b"new bytes"
    assert write_to(tmp_path / "fresh.json", b"x") == 1 and (tmp_path / "fresh.json").is_file()


def test_write_to_refuses_a_link_and_keeps_it_and_its_target(tmp_path: Path) -> None:
    """The sixth hostile pass: a link planted where an export goes (``DIR/requests.jsonl ->
    /etc/passwd``) was written through, ``--force`` replacing its target."""
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with pytest.raises(HostError, match=r"link\.json: it is a symbolic link \(to .*real\.json\)"):
        write_to(link, [b"new ", b"bytes"])
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == b"old"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(HostError, match="symbolic link"):
        write_atomic(dangling, b"x")
    assert not (tmp_path / "nowhere.json").exists() and dangling.is_symlink()


def test_write_to_streams_into_a_fifo_without_replacing_it(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    assert write_to(fifo, [b"a" * 70_000, b"b"], chunk_bytes=4096) == 70_001
    reader.join(10)
    assert got == [b"a" * 70_000 + b"b"]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_fifo_no_reader_opens_is_given_up_in_a_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a blocked open() let no stop signal through (`ledger export FIFO` outlived SIGTERM)
    import servelab.io.files as files

    monkeypatch.setattr(files, "FIFO_READER_WAIT_S", 0.3)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(HostError, match=r"no reader opened the FIFO in 0\.3 s") as caught:
        write_to(fifo, b"data")
    assert str(caught.value) == f"cannot write {fifo}: no reader opened the FIFO in 0.3 s"  # once
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_write_to_a_character_device_keeps_the_device() -> None:
    assert write_to(Path("/dev/null"), [b"x" * 10, b"y"]) == 11
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    with pytest.raises(HostError, match=r"write to /dev/full failed after 0 bytes: No space left"):
        write_to(Path("/dev/full"), b"data")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_write_to_dev_fd_writes_the_open_descriptor() -> None:
    """``>(gzip > x.gz)``: the shell hands the command ``/dev/fd/N``, the write end of a pipe."""
    read_end, write_end = os.pipe()
    try:
        assert write_to(Path(f"/dev/fd/{write_end}"), b"exported\n") == 9
        os.close(write_end)
        write_end = -1
        assert os.read(read_end, 100) == b"exported\n"
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


def test_write_to_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(HostError, match="it is a directory"):
        write_to(tmp_path, b"x")


def test_a_link_to_a_folder_is_refused_before_any_work_and_by_the_writer(tmp_path: Path) -> None:
    """The sixteenth pass (issue 38): ``check_overwrite`` let a link to a folder (and a folder)
    pass, ``--force`` or not, so ``bench --export`` ran its whole load before failing."""
    folder = tmp_path / "folder"
    folder.mkdir()
    link = tmp_path / "records.jsonl"
    link.symlink_to(folder)
    refusal = f"cannot write {link}: it is a symbolic link (to {folder}, a folder)"
    for force in (False, True):
        with pytest.raises(OptionError) as refused:
            check_overwrite(link, force)
        assert refusal in str(refused.value)
        with pytest.raises(OptionError, match=f"cannot write {folder}: it is a directory"):
            check_overwrite(folder, force)
    with pytest.raises(HostError) as written:
        write_to(link, b"x")
    assert refusal in str(written.value)
    assert link.is_symlink() and list(folder.iterdir()) == []


def test_a_missing_parent_directory_is_an_error_naming_the_path(tmp_path: Path) -> None:
    """Defect 1 (issue 38): missing parent folders were created silently."""
    target = tmp_path / "no" / "such" / "out.txt"
    with pytest.raises(HostError, match=r"cannot write .*out.txt: no directory"):
        write_atomic(target, b"x")
    assert not (tmp_path / "no").exists()


def test_write_atomic_streams_into_devices_and_fifos_and_refuses_links(tmp_path: Path) -> None:
    """Defect 1 (issue 38): every writer, not only ``ledger export``'s, keeps a device, a FIFO
    and a link what they are (a link to a regular file: refused, its target kept)."""
    with pytest.raises(HostError, match="No space left"):
        write_atomic(Path("/dev/full"), b"data")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    assert write_atomic(fifo, b"line\n") == 5
    reader.join(10)
    assert got == [b"line\n"] and stat.S_ISFIFO(fifo.lstat().st_mode)
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    with pytest.raises(HostError, match="symbolic link"):
        write_if_changed(link, b"new")
    assert link.is_symlink() and target.read_bytes() == b"old"
    write_atomic(link, b"new", follow_links=True)
    assert link.is_symlink() and target.read_bytes() == b"new"


_READ_ONLY_WRITE = """
import sys
from pathlib import Path
from servelab.errors import HostError
from servelab.io.files import write_atomic
try:
    write_atomic(Path(sys.argv[1]), b"new\\n")
except HostError as exc:
    print(exc)
    sys.exit(3)
"""


def test_a_read_only_file_is_refused_and_kept_for_a_non_root_user() -> None:
    """A 0444 file is not replaced by a user that could not open it for writing (the rename over
    it needs only the directory's rights). The write runs as ``nobody`` when the suite is root
    (``setpriv``), so the check is real under root too."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="servelab-ro-", dir="/tmp"))
    try:
        folder.chmod(0o777)
        target = folder / "kept.txt"
        target.write_bytes(b"old\n")
        target.chmod(0o444)
        prefix: list[str] = []
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("running as root without setpriv: no non-root user to write as")
            prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
            os.chown(target, 65534, 65534)  # its own file: only the mode forbids it
        done = subprocess.run(
            [*prefix, sys.executable, "-c", _READ_ONLY_WRITE, str(target)],
            capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")},
        )  # fmt: skip
        assert done.returncode == 3, done.stdout + done.stderr
        assert "Permission denied" in done.stdout and str(target) in done.stdout
        assert target.read_bytes() == b"old\n"
        assert stat.S_IMODE(target.stat().st_mode) == 0o444
        assert sorted(p.name for p in folder.iterdir()) == ["kept.txt"]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_check_directory_on_an_existing_file_says_it_is_not_a_directory(tmp_path: Path) -> None:
    """A low of issue 38's later pass: ``bench --export FILE`` said "File exists"."""
    taken = tmp_path / "out"
    taken.write_text("kept")
    with pytest.raises(HostError, match="it is not a directory"):
        check_directory(taken)
    assert taken.read_text() == "kept"


def test_a_report_written_at_the_end_of_a_run_takes_an_unused_name(tmp_path: Path) -> None:
    """The fifth hostile pass: ``ab``/``tune --export`` without a ledger wrote ``ab-run.md`` over
    an earlier one. A report written after a long run neither replaces nor fails: it takes the
    next free name (an empty file destroys nothing and is reused)."""
    assert unused_stem(tmp_path, "ab-run", (".md", ".png")) == "ab-run"
    (tmp_path / "ab-run.png").write_bytes(b"precious")
    assert unused_stem(tmp_path, "ab-run", (".md", ".png")) == "ab-run-2"
    (tmp_path / "ab-run-2.md").write_text("")
    assert unused_stem(tmp_path, "ab-run", (".md", ".png")) == "ab-run-2"
    (tmp_path / "ab-run-2.md").write_text("kept")
    assert unused_stem(tmp_path, "ab-run", (".md", ".png")) == "ab-run-3"
    assert unused_stem(tmp_path / "missing", "x", (".md",)) == "x"


def test_write_files_refuses_a_planted_link_to_a_file_outside(tmp_path: Path) -> None:
    """The sixth hostile pass: ``bench --export --force DIR`` with ``DIR/requests.jsonl`` (or a
    folder of it) a link to a file outside: the outside file stays as it was."""
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "passwd"
    victim.write_text("root:x:0:0\n")
    export = tmp_path / "export"
    export.mkdir()
    (export / "requests.jsonl").symlink_to(victim)
    (export / "cases").symlink_to(outside)
    with pytest.raises(HostError, match=r"requests\.jsonl: it is a symbolic link"):
        write_files(export, {"requests.jsonl": b"{}\n"})
    with pytest.raises(HostError, match=r"export/cases is a symbolic link"):
        write_files(export, {"cases/passwd": b"pwned\n"})
    assert victim.read_text() == "root:x:0:0\n" and sorted(p.name for p in outside.iterdir()) == [
        "passwd"
    ]
    assert (export / "requests.jsonl").is_symlink()


def test_a_descriptors_name_is_written_to_that_descriptor(tmp_path: Path) -> None:
    """``-o /dev/stdout > FILE``: the name leads through links to a regular file; it is the open
    descriptor that is written (at its offset), the file never replaced."""
    out = tmp_path / "out.txt"
    with out.open("wb") as held:
        fd = held.fileno()
        assert write_to(Path(f"/dev/fd/{fd}"), b"one\n") == 4
        assert write_to(Path(f"/proc/self/fd/{fd}"), b"two\n") == 4
    assert out.read_bytes() == b"one\ntwo\n"


def test_a_name_too_long_for_the_writers_temporary_file_is_refused_before_any_work(
    tmp_path: Path,
) -> None:
    """The thirty-first pass's low: ``trace generate`` into a 300-character name exited 1 after
    its work ("File name too long"); a 240-character one fits its folder but not the temporary
    file written beside it (18 bytes longer), which failed the same way."""
    for name in ("a" * 300 + ".jsonl", "é" * 120 + ".jsonl"):  # 306 bytes; 246 bytes (UTF-8)
        with pytest.raises(OptionError, match=r"its name is \d+ bytes.*at most 255 bytes"):
            check_overwrite(tmp_path / name, False)
    fits = tmp_path / ("b" * 237)  # 237 + 18 = 255: the temporary file's name still fits
    check_overwrite(fits, False)
    write_atomic(fits, b"x")
    assert fits.read_bytes() == b"x" and sorted(tmp_path.iterdir()) == [fits]
    fifo = tmp_path / ("f" * 250)  # a FIFO is streamed into: no temporary file, not refused
    os.mkfifo(fifo)
    check_overwrite(fifo, False)
    # the thirty-fourth pass: a folder's name over 255 bytes, or a path over PATH_MAX, exited 1
    with pytest.raises(OptionError, match="a folder's name in it is 256 bytes, over 255"):
        check_overwrite(tmp_path / ("d" * 256) / "x.jsonl", False)
    with pytest.raises(OptionError, match=r"its path is \d+ bytes, over 4095"):
        check_overwrite(tmp_path.joinpath(*["d" * 200] * 21, "x.jsonl"), False)


def test_a_dotdot_after_a_link_writes_where_the_system_resolves_it(tmp_path: Path) -> None:
    """The thirty-fourth pass: ``LINK/../sub/x`` (``sub`` beside the link's target, not beside
    the link) passed the checks and failed the write ("No such file or directory"): the
    temporary file was made in the folder read as text, the rename resolved through the link."""
    (tmp_path / "tgtp" / "tgt").mkdir(parents=True)
    (tmp_path / "tgtp" / "sub").mkdir()
    (tmp_path / "ow").mkdir()
    (tmp_path / "ow" / "lnk").symlink_to(tmp_path / "tgtp" / "tgt")
    target = tmp_path / "ow" / "lnk" / ".." / "sub" / "x.jsonl"
    check_overwrite(target, False)
    write_atomic(target, b"x")
    assert (tmp_path / "tgtp" / "sub" / "x.jsonl").read_bytes() == b"x"
    assert [p.name for p in (tmp_path / "tgtp" / "sub").iterdir()] == ["x.jsonl"]
    assert sorted(p.name for p in (tmp_path / "ow").iterdir()) == ["lnk"]
