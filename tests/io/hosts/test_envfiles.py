"""Env files and their backups through a host, locally and over a real loopback sshd."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.errors import KnobError
from servelab.io.hosts import envfiles
from servelab.io.hosts.envfiles import (
    BACKUP_KEEP,
    ORIGIN,
    backup_dir,
    file_backup_dir,
    latest_backup,
    list_backups,
    previous_version,
    read_env_bytes,
    read_env_file,
    save_copy,
    write_env_file,
)
from servelab.io.hosts.host import Host
from tests.support.specs import SECRET

KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"


async def test_missing_file_is_none_and_a_bad_line_is_not_echoed(
    host: Host, tmp_path: Path
) -> None:
    path = tmp_path / "decode.env"
    assert await read_env_bytes(host, str(path)) is None
    assert await read_env_file(host, str(path)) is None
    path.write_text(f"{KNOB}=512\nSECRET_TOKEN {SECRET}\n")
    assert await read_env_bytes(host, str(path)) == path.read_bytes()
    with pytest.raises(KnobError, match=r"decode.env:2") as info:
        await read_env_file(host, str(path))
    assert SECRET not in str(info.value)


async def test_backups_newest_first_and_the_previous_version(host: Host, tmp_path: Path) -> None:
    path = tmp_path / "decode.env"
    assert await list_backups(host, str(path), None) == []
    assert await latest_backup(host, str(path), None) is None
    assert await list_backups(host, str(tmp_path / "nowhere" / "x.env"), None) == []
    path.write_text(f"{KNOB}=256\n")
    older = await host.write_file_atomic(str(path), f"{KNOB}=512\n".encode())
    same = await host.write_file_atomic(str(path), path.read_bytes())  # a copy, identical
    assert older is not None and same is not None
    assert await list_backups(host, str(path), None) == [same, older]
    assert await latest_backup(host, str(path), None) == same
    previous = await previous_version(host, str(path), path.read_bytes(), None)
    assert previous is not None and previous[0] == older
    assert previous[1] is not None and previous[1].get(KNOB) == "256"


async def test_backups_go_under_the_state_dir_pruned_to_the_last_n(
    host: Host, tmp_path: Path
) -> None:
    """Nothing appears beside the env file; the newest BACKUP_KEEP backups are kept."""
    (tmp_path / "env").mkdir()
    path, where = tmp_path / "env" / "decode.env", str(tmp_path / "state" / "backups" / "decode")
    assert backup_dir(str(tmp_path / "state"), "decode") == where
    assert await write_env_file(host, str(path), b"K=0\n", backup_dir=where) is None  # no file
    assert not (tmp_path / "state").exists()
    made = [await write_env_file(host, str(path), f"K={i}\n".encode(), backup_dir=where)
            for i in range(1, BACKUP_KEEP + 4)]  # fmt: skip
    own = file_backup_dir(where, str(path))  # one folder per file, named by its path
    assert own.startswith(f"{where}/decode.env-")
    assert all(m is not None and m.startswith(f"{own}/decode.env.bak-") for m in made)
    assert sorted(p.name for p in (tmp_path / "env").iterdir()) == ["decode.env"]
    kept = await list_backups(host, str(path), where)
    assert kept == list(reversed(made))[:BACKUP_KEEP]  # newest first, the oldest three pruned
    assert len(list(Path(own).glob("decode.env.bak-*"))) == BACKUP_KEEP
    assert (Path(own) / ORIGIN).read_text() == str(path)
    assert Path(kept[0]).read_bytes() == f"K={BACKUP_KEEP + 2}\n".encode()
    assert Path(kept[0]).stat().st_mode & 0o077 == 0  # a backup may hold secrets: owner only
    previous = await previous_version(host, str(path), path.read_bytes(), where)
    assert previous is not None and previous[0] == kept[0]


async def test_backups_of_older_servelab_beside_the_file_are_still_read(
    host: Host, tmp_path: Path
) -> None:
    path, where = tmp_path / "decode.env", str(tmp_path / "state" / "backups" / "decode")
    path.write_text("K=1\n")
    legacy = await host.write_file_atomic(str(path), b"K=2\n")  # beside the file, as before
    newer = await write_env_file(host, str(path), b"K=3\n", backup_dir=where)
    copy = await save_copy(host, str(path), where, kind="pre-restart")
    own = file_backup_dir(where, str(path))
    assert copy is not None and copy.startswith(f"{own}/decode.env.pre-restart-")
    assert await list_backups(host, str(path), where) == [newer, legacy]  # copies are not backups
    assert await latest_backup(host, str(path), where) == newer
    assert await save_copy(host, str(tmp_path / "missing.env"), where, kind="pre-restart") is None


def test_public_api() -> None:
    for name in envfiles.__all__:
        assert hasattr(envfiles, name)
