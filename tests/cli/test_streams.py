"""KeptStream on real descriptors: a pipe whose reader closed, /dev/full, a working pipe."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
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


def test_a_process_started_without_stdout_keeps_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """``servelab --version >&-``: Python's ``sys.stdout`` is None; it stays None (rich and
    click then write nowhere), never a stream whose every write fails."""
    monkeypatch.setattr(sys, "stdout", None)
    with kept_streams() as streams:
        assert sys.stdout is None and streams.out is None
        assert streams.unsaid() is None
    assert sys.stdout is None
