"""KeptStream on real descriptors: a pipe whose reader closed, /dev/full, a working pipe."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

import pytest

from servelab.cli.streams import KeptStream, KeptStreams, kept_streams


@contextmanager
def _closed_pipe() -> Iterator[TextIO]:
    """A text stream onto a pipe whose reader has gone."""
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "w", encoding="utf-8") as stream:
        yield stream


def test_a_write_to_a_closed_pipe_is_remembered_and_its_descriptor_then_discards() -> None:
    with _closed_pipe() as raw:
        kept = KeptStream(raw, "standard output")
        assert kept.write("first\n") == len("first\n")
        kept.flush()  # the write reaches the pipe here: EPIPE, never raised
        assert kept.lost is not None and kept.lost.errno == errno.EPIPE
        assert kept.write("x" * 200_000) == 200_000  # nothing more is written
        kept.writelines(["a\n", "b\n"])
        kept.flush()
        os.write(raw.fileno(), b"a write that bypasses it")  # now /dev/null: no EPIPE
        assert os.readlink(f"/proc/self/fd/{raw.fileno()}") == os.devnull
        assert kept.isatty() is False and kept.encoding == raw.encoding
        streams = KeptStreams(kept, KeptStream(sys.stderr, "standard error"))
        assert streams.unsaid() is None  # a reader that left: the command's own code


def test_a_full_disk_is_output_lost_which_the_exit_code_says() -> None:
    with open("/dev/full", "w", encoding="utf-8") as raw:
        kept = KeptStream(raw, "standard output")
        kept.write("{}\n")
        kept.flush()
        assert kept.lost is not None and kept.lost.errno == errno.ENOSPC
        unsaid = KeptStreams(kept, KeptStream(sys.stderr, "standard error")).unsaid()
        assert unsaid is not None and unsaid.errno == errno.ENOSPC
        assert (unsaid.filename, unsaid.strerror) == ("standard output", os.strerror(errno.ENOSPC))


def test_a_working_stream_passes_everything_through() -> None:
    read, write = os.pipe()
    with os.fdopen(read, "rb") as reader, os.fdopen(write, "w", encoding="utf-8") as raw:
        kept = KeptStream(raw, "standard output")
        kept.write("é\x00\ufeffline\n")
        kept.flush()
        assert kept.lost is None
        raw.close()
        assert reader.read() == "é\x00\ufeffline\n".encode()


def test_kept_streams_wraps_once_and_puts_the_streams_back() -> None:
    before = sys.stdout, sys.stderr
    with kept_streams() as outer:
        assert sys.stdout is outer.out and sys.stderr is outer.err
        with kept_streams() as inner:
            assert inner.out is outer.out and inner.err is outer.err
        assert sys.stdout is outer.out
    assert (sys.stdout, sys.stderr) == before


def test_a_process_python_gave_no_stdout_writes_to_its_descriptor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Python's ``sys.stdout`` is None (the process started with descriptor 1 closed, ``>&-``;
    here the descriptor is open, pytest's): a kept stream is made onto descriptor 1, never None
    (rich's console asked None ``isatty()`` and every command died with a traceback)."""
    monkeypatch.setattr(sys, "stdout", None)
    with kept_streams() as streams:
        assert isinstance(sys.stdout, KeptStream) and streams.out is sys.stdout
        assert streams.out.fileno() == 1 and streams.out.isatty() in (True, False)
        assert streams.unsaid() is None
    assert sys.stdout is None


#: Runs ``servelab`` (``$0 -m servelab``) with the descriptors named by ``$1`` closed.
_CLOSED = 'c="$1"; shift; case $c in *0*) exec 0<&- ;; esac; case $c in *1*) exec 1>&- ;; esac; \
case $c in *2*) exec 2>&- ;; esac; exec "$@"'


def _closed_run(closed: str, *argv: str) -> int:
    """``argv`` run with descriptors ``closed`` (e.g. "0 1 2") closed, its exit code."""
    done = subprocess.run(["sh", "-c", _CLOSED, "sh", closed, *argv], timeout=120)
    return done.returncode


@pytest.mark.parametrize("closed", ["1", "2", "0", "1 2", "0 1 2"])
def test_commands_started_with_descriptors_closed_do_their_work(
    closed: str, tmp_path: Path
) -> None:
    """``servelab … >&-`` (or ``2>&-``, ``<&-``): the command does its work and exits 0 (rich's
    console asked a missing ``sys.stdout`` ``isatty()``: a traceback, exit 1, nothing done)."""
    trace = tmp_path / "t.jsonl"
    argv = (sys.executable, "-m", "servelab", "trace", "generate", str(trace), "--sessions", "2")
    assert _closed_run(closed, *argv) == 0
    assert len(trace.read_text().splitlines()) > 0


def test_a_closed_descriptor_is_held_by_dev_null_so_no_file_takes_its_number(
    tmp_path: Path,
) -> None:
    """With descriptors 1 and 2 closed, the next file opened would be number 1 and take all that
    is written to standard output: the kept streams hold them on ``/dev/null`` first."""
    seen = tmp_path / "seen"
    code = (
        "import os, sys\n"
        "from servelab.cli.streams import kept_streams\n"
        "with kept_streams():\n"
        "    links = [os.readlink(f'/proc/self/fd/{fd}') for fd in (0, 1, 2)]\n"
        "    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)\n"
        "    print('to nobody')\n"
        "    os.write(fd, ('|'.join(links) + f'|{fd}').encode())\n"
    )
    assert _closed_run("0 1 2", sys.executable, "-c", code, str(seen)) == 0
    *links, number = seen.read_text().split("|")
    assert links == [os.devnull] * 3 and int(number) > 2
