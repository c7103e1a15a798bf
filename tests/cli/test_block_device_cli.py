"""A block device named as an output is refused, ``--force`` or not (issue 38, the twenty-fourth
pass): ``init -o DEV``, ``ledger export … DEV`` and ``trace generate DEV`` wrote into a loop
device, overwriting the disk image behind it. A real loop device (``losetup -f --show IMG``, as
root) over a file whose bytes are checked unchanged afterwards."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.errors import HostError
from servelab.io.files import REMOTE_WRITE_SCRIPT, write_atomic
from servelab.io.ledger.ledger import Ledger
from tests.support import run_cli

#: What the disk image holds: any byte changed is a write that reached it.
_IMAGE = bytes(range(256)) * 4096  # 1 MiB


@pytest.fixture
def loop_device(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A loop device over a 1 MiB image, and the image; detached afterwards."""
    losetup = shutil.which("losetup")
    if os.geteuid() != 0 or losetup is None:
        pytest.skip("a loop device needs root and losetup")
    image = tmp_path / "disk.img"
    image.write_bytes(_IMAGE)
    made = subprocess.run([losetup, "-f", "--show", str(image)], capture_output=True, text=True,
                          timeout=30, check=False)  # fmt: skip
    if made.returncode != 0:
        pytest.skip(f"no loop device: {made.stderr.strip()}")
    device = Path(made.stdout.strip())
    assert stat.S_ISBLK(device.stat().st_mode)
    try:
        yield device, image
    finally:
        subprocess.run([losetup, "-d", str(device)], timeout=30, check=False)


def _refused(done: subprocess.CompletedProcess[str], device: Path, image: Path) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"cannot write {device}: it is a block device" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert image.read_bytes() == _IMAGE  # the disk image untouched


@pytest.mark.parametrize("force", [False, True])
def test_trace_generate_refuses_a_block_device(loop_device: tuple[Path, Path], force: bool) -> None:
    device, image = loop_device
    flags = ["--force"] if force else []
    _refused(run_cli("trace", "generate", str(device), "--sessions", "2", *flags), device, image)


@pytest.mark.parametrize("force", [False, True])
def test_ledger_export_refuses_a_block_device(
    loop_device: tuple[Path, Path], tmp_path: Path, force: bool
) -> None:
    device, image = loop_device
    ledger = tmp_path / "ledger.db"
    with Ledger.open(ledger) as opened:
        opened.record_bench_run(label="r", config={}, summary={"ok": 1}, records=[])
    flags = ["--force"] if force else []
    done = run_cli("ledger", "export", str(device), "--ledger", str(ledger), *flags)
    _refused(done, device, image)


def test_init_output_refuses_a_block_device(loop_device: tuple[Path, Path]) -> None:
    device, image = loop_device
    _refused(run_cli("init", "--router", "http://127.0.0.1:9", "-o", str(device)), device, image)


def test_a_link_to_a_block_device_is_refused_too(
    loop_device: tuple[Path, Path], tmp_path: Path
) -> None:
    device, image = loop_device
    link = tmp_path / "trace.jsonl"
    link.symlink_to(device)
    done = run_cli("trace", "generate", str(link), "--sessions", "2", "--force")
    assert done.returncode == 2 and f"cannot write {link}: it is a block device" in done.stderr
    assert image.read_bytes() == _IMAGE


def test_the_writer_itself_refuses_a_block_device(loop_device: tuple[Path, Path]) -> None:
    """The one writer, whoever calls it (a deployment's env file linked to a device, too)."""
    device, image = loop_device
    for follow in (False, True):
        with pytest.raises(HostError, match="it is a block device"):
            write_atomic(device, b"x" * 4096, follow_links=follow)
    assert image.read_bytes() == _IMAGE and stat.S_ISBLK(device.stat().st_mode)


def test_the_ssh_hosts_write_script_refuses_a_block_device(
    loop_device: tuple[Path, Path], tmp_path: Path
) -> None:
    """The same rule in the POSIX shell an SSH host runs, here through a link to the device (a
    deployment's env file, followed)."""
    device, image = loop_device
    link = tmp_path / "env"
    link.symlink_to(device)
    script = REMOTE_WRITE_SCRIPT.format(path=shlex.quote(str(link)), backup="''")
    done = subprocess.run(["sh", "-c", script], input=b"x" * 4096, capture_output=True,
                          timeout=30, check=False)  # fmt: skip
    assert done.returncode == 1 and b"it is a block device" in done.stderr, done.stderr
    assert image.read_bytes() == _IMAGE and link.is_symlink()


def test_character_devices_stay_streamed_into() -> None:
    done = run_cli("trace", "generate", "/dev/null", "--sessions", "2")
    assert done.returncode == 0, done.stderr
