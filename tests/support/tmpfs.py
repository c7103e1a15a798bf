"""A small tmpfs for tests of a full or read-only disk: mounted, filled, unmounted.

Mounting needs root (CI runs as root); without it, or where the kernel refuses the mount, the
test is skipped with the reason.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["fill", "read_only", "tmpfs"]


@contextmanager
def tmpfs(mount: Path, size: str = "256k") -> Iterator[Path]:
    """A tmpfs of ``size`` at ``mount`` (made here), unmounted at the end."""
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(mount: Path) -> None:
    """Fill ``mount`` to its last byte (a file ``filler``, appended to until ENOSPC)."""
    with (mount / "filler").open("ab", buffering=0) as filler:
        try:
            while True:
                filler.write(b"\0" * 512)
        except OSError:  # ENOSPC: full
            pass


@contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """``folder`` (an existing folder) bind-mounted over itself read-only, unmounted at the end
    (``mount --bind F F; mount -o remount,ro,bind F``)."""
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root (CI runs as root)")
    done = subprocess.run(["mount", "--bind", str(folder), str(folder)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {done.stderr.strip()}")
    try:
        done = subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)],
                              capture_output=True, text=True, check=False)  # fmt: skip
        if done.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {done.stderr.strip()}")
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)
