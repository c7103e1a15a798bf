"""An env file (or config file) written through a host, locally and over a real loopback sshd,
stays what it was: a symbolic link stays a link (its target written), a file owned
``root:daemon 0640`` stays so, a missing directory is an error naming the path."""

from __future__ import annotations

import asyncio
import grp
import os
import stat
from pathlib import Path

import pytest

from servelab.errors import HostError, KnobError
from servelab.io.hosts.envfiles import (
    MAX_FILE_BYTES,
    env_field,
    read_env_bytes,
    read_env_file,
    write_env_file,
)
from servelab.io.hosts.host import Host

KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"


async def test_a_linked_env_file_stays_a_link_and_its_target_is_written(
    host: Host, tmp_path: Path
) -> None:
    """Defect 18 (issue 38): an env file that is a symlink was replaced by a regular file."""
    target = tmp_path / "real" / "decode.env"
    target.parent.mkdir()
    target.write_text(f"{KNOB}=256\n")
    link = tmp_path / "decode.env"
    link.symlink_to(target)
    backup = await write_env_file(
        host, str(link), f"{KNOB}=512\n".encode(), backup_dir=str(tmp_path / "bak")
    )
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == f"{KNOB}=512\n"
    assert backup is not None and Path(backup).read_text() == f"{KNOB}=256\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["decode.env"]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to root:daemon takes root")
async def test_owner_group_and_mode_are_kept(host: Host, tmp_path: Path) -> None:
    """Defect 18 (issue 38): an env file owned root:daemon 0640 became root:root."""
    daemon = grp.getgrnam("daemon").gr_gid
    path = tmp_path / "decode.env"
    path.write_text(f"{KNOB}=256\n")
    os.chown(path, 0, daemon)
    os.chmod(path, 0o640)
    await write_env_file(host, str(path), f"{KNOB}=512\n".encode(), backup_dir=None)
    st = path.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, daemon, 0o640)
    assert path.read_text() == f"{KNOB}=512\n"


async def test_a_new_env_file_is_owner_only_and_a_missing_directory_is_named(
    host: Host, tmp_path: Path
) -> None:
    path = tmp_path / "new.env"
    await write_env_file(host, str(path), b"A=1\n", backup_dir=None)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    missing = tmp_path / "no" / "such" / "decode.env"
    with pytest.raises(HostError, match="no directory"):
        await write_env_file(host, str(missing), b"A=1\n", backup_dir=None)
    assert not (tmp_path / "no").exists()


async def test_a_fifo_or_a_huge_file_is_refused_unread(host: Host, tmp_path: Path) -> None:
    """Bounds before work (issue 38): an env or config file is read only when it is a regular
    file of at most MAX_FILE_BYTES; a FIFO is never waited on, a huge file never read whole."""
    fifo = tmp_path / "decode.yaml"
    os.mkfifo(fifo)
    with pytest.raises(HostError, match="not a regular file"):
        await asyncio.wait_for(read_env_bytes(host, str(fifo)), 30)
    huge = tmp_path / "huge.env"
    with huge.open("wb") as out:
        out.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(HostError, match="larger than"):
        await read_env_bytes(host, str(huge))
    with pytest.raises(HostError, match="not a regular file"):
        await read_env_bytes(host, "/dev/zero")


async def test_a_service_env_file_refused_unread_is_bad_input_naming_its_field(
    host: Host, tmp_path: Path
) -> None:
    """Issue 38: a service's env file too large, a FIFO or a device was "error: local: cannot
    read ...", exit 1; read as the spec's field, it is a KnobError (exit 2) naming the field and
    the file, locally and over SSH (one reader: ``Host.read_file``'s bound)."""
    field = env_field("decode")
    fifo = tmp_path / "decode.env"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.env"
    with huge.open("wb") as out:
        out.truncate(MAX_FILE_BYTES + 1)
    cases = (
        (str(fifo), "not a regular file"),
        ("/dev/zero", "not a regular file"),
        (str(huge), "larger than 1,048,576 bytes, the most an env file is read up to"),
    )
    for path, said in cases:
        with pytest.raises(KnobError) as refused:
            await asyncio.wait_for(read_env_bytes(host, path, field=field), 30)
        assert str(refused.value).startswith(f"{path} (services.decode.env_file): {said}")
        with pytest.raises(KnobError, match=field):
            await asyncio.wait_for(read_env_file(host, path, field=field), 30)
    assert await read_env_bytes(host, str(tmp_path / "none.env"), field=field) is None
