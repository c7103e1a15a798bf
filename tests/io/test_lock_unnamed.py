"""A lock whose holder's name cannot be written (issue 38, the tenth pass): on a read-only state
directory the existing lock file is opened read-only and held all the same, unnamed, and it
still excludes another process; a lock file that cannot even be opened is a named HostError,
never a raw OSError. A real read-only tmpfs (root, as CI has)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.errors import DeploymentBusy, HostError
from servelab.io.lock import LOCK_FILE, TRAFFIC_FILE, hold
from tests.io.test_lock import _holder


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs holding empty lock files (the change and measurement locks), remounted ro."""
    mount = tmp_path / "state"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        for name in (LOCK_FILE, TRAFFIC_FILE):
            (mount / name).write_bytes(b"")
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_read_only_lock_is_held_unnamed_and_still_excludes(read_only: Path) -> None:
    with hold(read_only, "servelab down", name="t") as lock:
        assert lock.unnamed is not None
        path, why = lock.unnamed
        assert path == read_only / LOCK_FILE and "Read-only file system" in why
    other = _holder(read_only)  # another process holds it, unnamed
    try:
        with pytest.raises(DeploymentBusy) as refused, hold(read_only, "servelab up", name="t"):
            pytest.fail("took a held lock")
        assert "another command (starting) holds its lock" in str(refused.value)
    finally:
        other.communicate("")
    with hold(read_only, "servelab down", name="t") as again:  # released: free again
        assert again.taken_over is None


def test_a_lock_file_that_cannot_be_made_is_a_named_error(read_only: Path) -> None:
    with pytest.raises(HostError) as caught, hold(read_only / "sub", "servelab down", name="t"):
        pytest.fail("held a lock it could not make")
    assert "cannot open the deployment lock" in str(caught.value)
    assert "Read-only file system" in str(caught.value)
