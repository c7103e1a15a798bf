"""Env files and their backups through a host, locally and over a real loopback sshd."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.errors import KnobError
from servelab.io import envfiles
from servelab.io.envfiles import (
    latest_backup,
    list_backups,
    previous_version,
    read_env_bytes,
    read_env_file,
)
from servelab.io.hosts import Host
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
    assert await list_backups(host, str(path)) == []
    assert await latest_backup(host, str(path)) is None
    assert await list_backups(host, str(tmp_path / "nowhere" / "x.env")) == []
    path.write_text(f"{KNOB}=256\n")
    older = await host.write_file_atomic(str(path), f"{KNOB}=512\n".encode())
    same = await host.write_file_atomic(str(path), path.read_bytes())  # a copy, identical
    assert older is not None and same is not None
    assert await list_backups(host, str(path)) == [same, older]
    assert await latest_backup(host, str(path)) == same
    previous = await previous_version(host, str(path), path.read_bytes())
    assert previous is not None and previous[0] == older
    assert previous[1] is not None and previous[1].get(KNOB) == "256"


def test_public_api() -> None:
    for name in envfiles.__all__:
        assert hasattr(envfiles, name)
